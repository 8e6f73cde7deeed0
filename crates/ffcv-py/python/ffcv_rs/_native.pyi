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

class Loader:
    """The native loader; use ``ffcv_rs.loader.Loader``."""

    def __init__(
        self,
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
    ) -> None: ...
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
    def start_epoch(self) -> int: ...
    def next_batch(self, id: int) -> Optional[List[BatchOutput]]: ...
    def stop_epoch(self, id: int) -> None: ...
    def is_running(self, id: int) -> bool: ...
    def state_json(self) -> str: ...
    def live_threads(self) -> int: ...
    def stats(self) -> Dict[str, Any]: ...
    def indices(self) -> List[int]: ...

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
