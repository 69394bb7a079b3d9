"""Reading through the table: fetch (obstore) -> decode -> assemble, and verify against h5py."""

from .array import Array, ReadOptions
from .decode import ChunkDecoder, make_decoder
from .fetch import Fetcher
from .verify import VerifyReport, verify

__all__ = ["Array", "ChunkDecoder", "Fetcher", "ReadOptions", "VerifyReport", "make_decoder", "verify"]
