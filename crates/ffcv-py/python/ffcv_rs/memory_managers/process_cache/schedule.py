"""FFCV's page schedule internals (``ffcv.memory_managers.process_cache.schedule``). The
Rust loader computes and runs the process cache's schedule (page-cache crate); these
names import but raise on use."""

from ..._compat import unsupported, unsupported_function
from .page_reader import PageReader

__all__ = ["Schedule", "ScheduleExecutor", "compute_schedule", "PageReader"]

_INSTEAD = ("the Rust loader schedules the process cache's pages itself: use "
            "Loader(os_cache=False), and `ffcv order --no-os-cache FILE` to see the schedule")

Schedule = unsupported("ffcv.memory_managers.process_cache.schedule.Schedule", _INSTEAD)
ScheduleExecutor = unsupported(
    "ffcv.memory_managers.process_cache.schedule.ScheduleExecutor", _INSTEAD)
compute_schedule = unsupported_function(
    "ffcv.memory_managers.process_cache.schedule.compute_schedule", _INSTEAD)
