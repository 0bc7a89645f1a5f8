"""Shared by the fluid kernel's modules: numba settings, CCA/mode codes, the RNG, the cache locator."""

from __future__ import annotations

import numpy as np
from numba import njit

from .constants import BBR_BW_WINDOW_ROUNDS, BBR_PROBE_GAINS, CUBIC_BETA


def _install_cache_locator() -> None:
    """Make numba's on-disk cache of the fluid kernel's modules depend on the files they compile in.

    The kernel freezes the values of constants.py and layout.py at compile time
    and links in the disciplines' cores and fluid hooks (``scidmz.disciplines``), but
    numba's cache stamp only hashes this file, so an edited constant or core
    would silently keep the old compiled kernel. This locator (used for
    common.py, cca.py, bbr1.py, bbr2.py and kernel.py only) adds those files' SHA-256 to the
    stamp; any change recompiles on the next use.
    """
    import hashlib
    import os

    from numba.core import caching

    from ...disciplines.registry import fluid_sources

    fluid_dir = os.path.dirname(os.path.abspath(__file__))
    # the modules whose compiled functions freeze those files: this one, the CCAs, the kernel
    mine = {os.path.join(fluid_dir, n) for n in ("common.py", "cca.py", "bbr1.py", "bbr2.py", "kernel.py")}
    # ... and the modules whose compiled code the kernel links in (an edited CCA would otherwise leave
    # the cached kernel holding the old one)
    deps = [os.path.join(fluid_dir, n) for n in ("constants.py", "layout.py", "cca.py", "bbr1.py", "bbr2.py")]
    # constants.py re-exports the wire facts and y's constants from these two
    deps += [os.path.join(os.path.dirname(os.path.dirname(fluid_dir)), n) for n in ("units.py", "state.py")]
    deps += [str(f) for f in fluid_sources()]

    def deps_hash() -> bytes:
        h = hashlib.sha256()
        for path in deps:
            with open(path, "rb") as fh:
                h.update(fh.read())
        return h.digest()

    def make(base: type) -> type:
        class _FluidKernelLocator(base):  # type: ignore[misc, valid-type]
            _scidmz_fluid = True

            @classmethod
            def from_function(cls, py_func, py_file):  # noqa: ANN001, ANN206
                if os.path.abspath(py_file) not in mine:
                    return None
                return super().from_function(py_func, py_file)

            def get_source_stamp(self):  # noqa: ANN202
                return (super().get_source_stamp(), deps_hash())

        return _FluidKernelLocator

    classes = getattr(getattr(caching, "CacheImpl", None), "_locator_classes", None)
    if not isinstance(classes, list):
        # numba reorganised its cache internals: keep its own stamp (edits of
        # constants.py then need `rm -r src/scidmz/plant/fluid/__pycache__`)
        return
    if not any(getattr(k, "_scidmz_fluid", False) for k in classes):
        # numba's own order: NUMBA_CACHE_DIR, in-tree __pycache__, user-wide cache dir
        classes[0:0] = [
            make(caching.UserProvidedCacheLocator),
            make(caching.InTreeCacheLocator),
            make(caching.UserWideCacheLocator),
        ]


_install_cache_locator()

INF = np.inf
# Fast-math without 'nnan'/'ninf': the kernel compares against inf on purpose.
# error_model="numpy" drops Python's zero-division checks (every divisor is guarded).
_FM = {"nsz", "arcp", "contract", "afn", "reassoc"}
_PROBE_GAINS = np.array(BBR_PROBE_GAINS)
_NSLOTS = BBR_BW_WINDOW_ROUNDS
_RENO_FRIENDLY_SLOPE = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA)  # RFC 8312 eq. 4
# CCA codes (constants.CCA_CODES)
RENO, CUBIC, BBR, BBR2, UDP, MINLOSS = 0, 1, 2, 3, 4, 5
# BBR modes and BBRv2 ProbeBW phases
STARTUP, DRAIN, PROBE_BW, PROBE_RTT = 0, 1, 2, 3
DOWN, CRUISE, REFILL, UP = 0, 1, 2, 3
CLASS_DTN, CLASS_CAMPUS, CLASS_SHORT = 0, 1, 2


# -- random numbers: one xorshift64* stream per instance (deterministic under prange) ------
@njit(cache=True, inline="always", error_model="numpy", fastmath=_FM)
def _rand(rng, b):
    x = rng[b]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[b] = x
    y = (x * np.uint64(2685821657736338717)) >> np.uint64(11)
    return (np.float64(y) + 0.5) * (1.0 / 9007199254740992.0)


