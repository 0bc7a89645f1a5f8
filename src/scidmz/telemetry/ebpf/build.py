"""Build the eBPF object with Debian's clang, on first use (no binary is committed).

``build()`` writes the generated header (``gen_header.render()``) and
compiles ``scidmz_telemetry.bpf.c`` with::

    clang -O2 -g -target bpf -I/usr/include/<multiarch> -I<build dir> -c scidmz_telemetry.bpf.c

into a cache folder keyed by a hash of the source, the header and the
compiler's version (``$SCIDMZ_EBPF_CACHE``, default ``~/.cache/scidmz/ebpf``),
so a changed constant rebuilds and an unchanged one costs nothing. A missing
clang or missing libbpf headers is one line (``EbpfBuildError``) naming the
Debian packages to install. ``-g`` keeps the BTF that libbpf needs for the
map definitions.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from ...fileio import atomic_write_bytes
from .gen_header import render

__all__ = ["build", "EbpfBuildError", "SOURCE"]

SOURCE = Path(__file__).with_name("scidmz_telemetry.bpf.c")
_HEADERS = ("bpf/bpf_helpers.h", "bpf/bpf_tracing.h", "bpf/bpf_core_read.h")


class EbpfBuildError(RuntimeError):
    """The object cannot be built here (one line: what is missing or what clang said)."""


def _cache_dir() -> Path:
    return Path(os.environ.get("SCIDMZ_EBPF_CACHE") or Path.home() / ".cache" / "scidmz" / "ebpf")


def _multiarch_include() -> list[str]:
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    d = Path("/usr/include") / arch
    return [f"-I{d}"] if arch and (d / "asm" / "types.h").exists() else []


def _clang() -> str:
    cc = shutil.which(os.environ.get("SCIDMZ_CLANG") or "clang")
    if not cc:
        raise EbpfBuildError("clang not found: the eBPF telemetry is built at first use "
                             "(apt-get install clang libbpf-dev)")
    return cc


def build(force: bool = False) -> Path:
    """Path of the compiled object, building it if the cache has none for this source."""
    cc = _clang()
    missing = [h for h in _HEADERS if not any((Path(d) / h).exists() for d in ("/usr/include", "/usr/local/include"))]
    if missing:
        raise EbpfBuildError(f"libbpf headers missing ({missing[0]}): apt-get install libbpf-dev")
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EbpfBuildError(f"cannot run {cc}: {exc}") from None
    header = render().encode()
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + b"\0" + header + b"\0" + version.encode()).hexdigest()[:16]
    out = _cache_dir() / key
    obj = out / "scidmz_telemetry.bpf.o"
    if obj.exists() and not force:
        return obj
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "scidmz_ebpf.h", header)
    tmp = out / f".build-{os.getpid()}.o"
    cmd = [cc, "-O2", "-g", "-target", "bpf", *_multiarch_include(), f"-I{out}", "-Wall", "-Werror",
           "-c", str(SOURCE), "-o", str(tmp)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise EbpfBuildError(f"{cc} timed out building {SOURCE.name}") from None
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
        raise EbpfBuildError(f"building {SOURCE.name} failed: {first.strip()}")
    os.replace(tmp, obj)
    return obj
