"""``ViewerNull``: runs the frame loop for a fixed number of frames and shows nothing (headless runs,
tests, benchmarks of the loop itself)."""

from __future__ import annotations

import time as _time

from .base import ViewerBase

__all__ = ["ViewerNull"]


class ViewerNull(ViewerBase):
    """A viewer that shows nothing; :meth:`is_running` turns False after ``num_frames`` frames.

    Args:
        num_frames: frames to run (>= 1).
        benchmark: measure frames per second of the loop (:meth:`benchmark_result`).
        benchmark_timeout: with ``benchmark``, stop running after this many wall-clock seconds
            of measuring (``None``: no limit).
        benchmark_start_frame: frames left out of the measurement at the start (kernel
            compilation, warm-up).
    """

    def __init__(self, num_frames: int = 1000, benchmark: bool = False, benchmark_timeout: float | None = None,
                 benchmark_start_frame: int = 3):  # fmt: skip
        super().__init__()
        if int(num_frames) < 1:
            raise ValueError(f"ViewerNull: num_frames must be at least 1, got {num_frames}")
        if benchmark_timeout is not None and not benchmark_timeout > 0:
            raise ValueError(f"ViewerNull: benchmark_timeout must be positive seconds or None, got {benchmark_timeout}")
        if int(benchmark_start_frame) < 0:
            raise ValueError(f"ViewerNull: benchmark_start_frame must be >= 0, got {benchmark_start_frame}")
        self.num_frames = int(num_frames)
        self.benchmark = bool(benchmark)
        self.benchmark_timeout = benchmark_timeout
        self.benchmark_start_frame = int(benchmark_start_frame)
        self._bench_start = None
        self._bench_frames = 0
        self._bench_elapsed = 0.0

    def end_frame(self) -> None:
        """Count the frame (and time it when benchmarking)."""
        super().end_frame()
        if not self.benchmark:
            return
        now = _time.perf_counter()
        if self.frame_count == self.benchmark_start_frame:
            self._bench_start = now
        elif self.frame_count > self.benchmark_start_frame and self._bench_start is not None:
            self._bench_frames = self.frame_count - self.benchmark_start_frame
            self._bench_elapsed = now - self._bench_start

    def is_running(self) -> bool:
        """True while fewer than ``num_frames`` frames ended (and the benchmark timeout has not passed)."""
        if self._closed or self.frame_count >= self.num_frames:
            return False
        return not (self.benchmark and self.benchmark_timeout is not None
                    and self._bench_elapsed >= self.benchmark_timeout)  # fmt: skip

    def benchmark_result(self) -> dict | None:
        """``{"fps", "frames", "elapsed"}`` of the measured frames (``None`` without ``benchmark``)."""
        if not self.benchmark:
            return None
        fps = self._bench_frames / self._bench_elapsed if self._bench_elapsed > 0 else 0.0
        return {"fps": fps, "frames": self._bench_frames, "elapsed": self._bench_elapsed}
