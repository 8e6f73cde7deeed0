"""Type stubs of the extension module ``ffcv_rs._native`` (Rust, crates/ffcv-py/src)."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__version__: str

class BatchOutput:
    """A read-only view of one output of a batch; keeps the batch's slot alive."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def typestr(self) -> str: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def slot(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def padded_rows(self) -> bool: ...
    @property
    def device(self) -> str: ...
    @property
    def __array_interface__(self) -> Dict[str, Any]: ...
    def lengths(self) -> Optional["BatchOutput"]: ...
    def sample_ids(self) -> Optional["BatchOutput"]: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

_Op = Tuple[str, Dict[str, Any]]

class Epoch:
    """One started epoch of a Loader; freeing it stops the epoch."""
    @property
    def id(self) -> int: ...
    def stop(self) -> None: ...

class Loader:
    """The native loader; use ``ffcv_rs.loader.Loader``."""

    def __init__(
        self,
        *,
        paths: List[str],
        batch_size: int,
        num_workers: int,
        os_cache: bool,
        order: str,
        distributed: bool,
        rank: int,
        world_size: int,
        seed: Optional[int],
        indices: Optional[Sequence[int]],
        pipelines: Dict[str, Optional[List[_Op]]],
        drop_last: bool,
        batches_ahead: int,
        recompile: bool,
        compile: bool,
        max_memory: Optional[int],
        prefetch_ahead: Optional[int],
        reader_threads: Optional[int],
        direct_io: bool,
        retain_pages: bool,
        hold_all_pages: bool,
        max_image_pixels: Optional[int],
        resume: Optional[str] = None,
        cuda_device: Optional[int] = None,
        page_cache_dir: Optional[str] = None,
        page_cache_size: Optional[int] = None,
        custom_order: Optional[List[int]] = None,
        custom_fields: Optional[Dict[str, Tuple[int, int]]] = None,
        mixture: Optional[Tuple[List[List[str]], List[float], Optional[int], str]] = None,
        views: Optional[List[Tuple[str, str]]] = None,
    ) -> None: ...
    def push_order(self, epoch: int, ids: List[int]) -> None: ...
    def next_batch_with_ids(self, id: int) -> Optional[Tuple[List[BatchOutput], List[int]]]: ...
    def __len__(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def num_workers(self) -> int: ...
    next_epoch: int
    def outputs(self) -> List[Tuple[str, List[int], str, str]]: ...
    def order(self, epoch: int) -> List[int]: ...
    def start_epoch(self) -> "Epoch": ...
    def next_batch(self, id: int) -> Optional[List[BatchOutput]]: ...
    def next_outputs(
        self, id: int, plan: Tuple[Tuple[int, int, Callable[[Any], Any]], ...]
    ) -> Optional[Tuple[Any, ...]]: ...
    def stop_epoch(self, id: int) -> None: ...
    def is_running(self, id: int) -> bool: ...
    def state_json(self) -> str: ...
    def live_threads(self) -> int: ...
    def stats(self) -> Dict[str, Any]: ...
    def indices(self) -> List[int]: ...
    def set_indices(self, indices: Optional[List[int]]) -> None: ...

def write_dataset(
    path: str,
    fields: List[Tuple[str, str, Dict[str, Any]]],
    get: Callable[[int], List[Any]],
    num_samples: int,
    page_size: int,
    num_workers: int,
    chunksize: int,
    progress: Optional[Callable[[int], None]] = None,
) -> Tuple[int, int, int]: ...

def ingest(
    format: str,
    inputs: List[str],
    out: str,
    fields: List[str],
    *,
    write_mode: str,
    max_resolution: Optional[int],
    jpeg_quality: int,
    smart_threshold: Optional[int],
    compress_probability: float,
    seed: int,
    jpeg_passthrough: bool,
    skip_unreadable: bool,
    num_workers: int,
    page_size: int,
    shards: int,
    shard_index: Optional[int],
    progress: Optional[Callable[[str, int, int], None]] = None,
) -> Dict[str, Any]: ...

class BatchTransforms:
    """Built-in transforms run natively on a batch of the Python part of a pipeline."""

    def __init__(self, shape: List[int], dtype: str, ops: List[_Op], num_workers: int,
                 compile: bool) -> None: ...
    @property
    def output_shape(self) -> List[int]: ...
    @property
    def output_dtype(self) -> str: ...
    def run(self, input_ptr: int, input_len: int, output_ptr: int, output_len: int,
            sample_ids: List[int], seed: int, epoch: int) -> None: ...

class BatchDecoder:
    """A built-in decoder over samples located in the file's map (one 40-byte record per
    sample: id, offset, length, 16 metadata bytes)."""

    def __init__(self, op: _Op, row_bytes: int, num_workers: int,
                 max_image_pixels: int) -> None: ...
    def run(self, map: Tuple[int, int], records: Tuple[int, int], output: Tuple[int, int],
            seed: int, epoch: int) -> None: ...

def check_file(path: str, custom_fields: Optional[Dict[str, Tuple[int, int]]] = None
               ) -> Tuple[int, int]: ...
def encode_jpeg(pixels: bytes, height: int, width: int, quality: int) -> bytes: ...
def downscale(pixels: bytes, height: int, width: int, max_resolution: int
              ) -> Optional[Tuple[int, int, bytes]]: ...
def mixup_lambdas(seed: int, epoch: int, sample_ids: List[int], alpha: float,
                  same_lambda: bool) -> List[float]: ...
def image_mixup(input_ptr: int, input_len: int, output_ptr: int, output_len: int, dtype: str,
                lambdas: List[float]) -> None: ...
def label_mixup(labels_ptr: int, labels_len: int, dtype: str, output_ptr: int,
                output_len: int, lambdas: List[float]) -> None: ...
def mixup_to_one_hot(mixed_ptr: int, mixed_len: int, num_classes: int, output_ptr: int,
                     output_len: int) -> None: ...
def colour_factors(p: float, magnitude: float, seed: int, epoch: int, sample_ids: List[int],
                   op_index: int) -> List[Optional[float]]: ...
