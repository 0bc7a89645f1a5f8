"""Safe result files: atomic writes, checked destinations, inputs that fail with one line.

Every writer of results (traces, datasets, gains, plots, pcaps, reports,
model directories) goes through this module, so the rules below hold for
all of them:

* **Atomic.** Data is written to a temporary file in the destination folder
  and renamed into place only when complete; a crash or Ctrl-C never leaves
  a half-written result.
* **Only regular files or new paths are written.** An existing destination
  that is a device node, FIFO, socket or directory is refused with one line
  (``DestinationError``, a ``ValueError``: the CLI answers exit 2) -- a
  rename over ``/dev/null`` as root would otherwise replace the device.
  Commands call :func:`check_output_file` / :func:`check_output_dir` before
  any work; :func:`atomic_path` checks again just before the rename.
* **Symlinks (our choice).** A destination that is a symlink to a regular
  file, or a dangling one, is replaced *as a link*: the new file takes the
  link's place and the link's target is never written. Following the link
  would let anyone who can create a link in a shared folder such as /tmp
  make a root run overwrite any file on the system. A symlink to anything
  else (``/tmp/x -> /dev/null``, a directory where a file is wanted) is
  refused like the thing it points to.
* **Missing parent directories are an error** unless the caller asks for
  them (``parents=True``) or the process enabled it with
  :func:`set_make_parents` (the CLI's ``--mkdir``). A typo in ``--out``
  should not silently create a tree of directories as root.
* **Unwritable destinations** (read-only file system, no permission) are
  refused up front with one line, before any work.

Inputs: :func:`read_bytes_input` is the one input gate (a regular file,
checked again on the descriptor, opened non-blocking, of bounded size);
:func:`read_text_input`, :func:`read_json_input` and :func:`load_npz` turn
unreadable, binary or truncated files into one line naming the file, instead
of a ``UnicodeDecodeError``, ``BadZipFile`` or a misleading "pickled data"
message. Documents are pre-scanned before they are parsed
(:func:`prescan_toml`, :func:`prescan_json`: nesting, keys, dotted-key parts,
key length), since the parsers allocate before any later check could run.

Output folders: :func:`own_folder` gives a run its folder for its whole life
(an exclusive ``flock``; a second run gets one line), and every file in it is
opened by :func:`open_member` / :func:`read_member`: ``O_NOFOLLOW``, non-blocking,
a regular file with one link, checked before anything is written or cut.
Records of what a run made are read by :mod:`scidmz.records`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "DestinationError",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_input_file",
    "check_model_destination",
    "check_output_dir",
    "check_member",
    "check_output_file",
    "ensure_dir",
    "FolderBusy",
    "LOCK_NAME",
    "open_member",
    "own_folder",
    "OwnedFolder",
    "read_fd",
    "read_member",
    "load_npz",
    "make_parents",
    "open_append",
    "parse_json",
    "parse_toml",
    "prescan_json",
    "prescan_toml",
    "strict_json",
    "read_bytes_input",
    "read_json_input",
    "read_text_input",
    "replace_dir",
    "set_make_parents",
]

_MAKE_PARENTS = False


class DestinationError(ValueError):
    """An output path that must not be written (one line, names the path)."""


def set_make_parents(flag: bool) -> None:
    """Process-wide: let writers create missing parent directories (the CLI's ``--mkdir``)."""
    global _MAKE_PARENTS
    _MAKE_PARENTS = bool(flag)


def make_parents() -> bool:
    return _MAKE_PARENTS


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _check_parent(dest: Path, parents: bool | None, what: str) -> None:
    """The folder ``dest`` goes into exists (or may be made) and is writable."""
    parent = dest.parent
    make = _MAKE_PARENTS if parents is None else parents
    if not parent.exists():
        if not make:
            raise DestinationError(
                f"{what} {dest}: directory {parent} does not exist (create it, or pass --mkdir)"
            )
        # The first existing ancestor must take new entries.
        anc = parent
        while not anc.exists() and anc != anc.parent:
            anc = anc.parent
        if not anc.is_dir():
            raise DestinationError(f"{what} {dest}: {anc} is not a directory")
        if not os.access(anc, os.W_OK | os.X_OK):
            raise DestinationError(f"{what} {dest}: cannot create directories in {anc} "
                                   f"({_why_unwritable(anc)})")
        return
    if not parent.is_dir():
        raise DestinationError(f"{what} {dest}: {parent} is not a directory")
    _probe(parent, dest, what)


_FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux
_FS_IMMUTABLE_FL = 0x10
_FS_APPEND_FL = 0x20


def _attr_flags(d: Path) -> int:
    """The directory's chattr flags (0 where the file system has none)."""
    import array
    import fcntl

    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return 0
    try:
        buf = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buf)
        return int(buf[0])
    except OSError:
        return 0
    finally:
        os.close(fd)


def _probe(d: Path, dest: Path, what: str) -> None:
    """Test that a file can be created in ``d`` and renamed there, leaving nothing behind.

    os.access alone misses /proc, /sys and other file systems that refuse new files even to root.
    An append-only or immutable directory (chattr +a / +i) takes new files but refuses the
    rename (and the removal of the probe): it is refused by its flags, before anything is made.
    The probe is an unnamed O_TMPFILE where the file system has them (nothing to remove), else a
    named temporary file.
    """
    if not os.access(d, os.W_OK | os.X_OK):
        raise DestinationError(f"{what} {dest}: cannot write in {d} ({_why_unwritable(d)})")
    flags = _attr_flags(d)
    if flags & (_FS_APPEND_FL | _FS_IMMUTABLE_FL):
        kind = "append-only" if flags & _FS_APPEND_FL else "immutable"
        raise DestinationError(f"{what} {dest}: {d} is {kind} (chattr); results cannot be replaced there")
    try:
        fd = os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise DestinationError(f"{what} {dest}: cannot write in {d} ({_why(exc)})") from None
    else:
        os.close(fd)
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=".scidmz-probe.", dir=d)
    except OSError as exc:
        raise DestinationError(f"{what} {dest}: cannot write in {d} ({_why(exc)})") from None
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError as exc:
        raise DestinationError(f"{what} {dest}: cannot remove files in {d} ({_why(exc)}); "
                               f"remove {tmp} by hand") from None


def _why(exc: OSError) -> str:
    return "read-only file system" if exc.errno == errno.EROFS else _strerror(exc)


def _why_unwritable(d: Path) -> str:
    # os.access says no for a read-only mount even as root; statvfs tells which case it is.
    try:
        if os.statvfs(d).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def check_output_file(path: str | os.PathLike[str], what: str = "output", parents: bool | None = None,
                      _probe_parent: bool = True) -> Path:
    """Refuse ``path`` as a file destination unless it is new or a regular file (see module doc).

    Raises ``DestinationError`` with one line naming ``what`` (e.g. ``--out``) and the path.
    """
    dest = Path(path)
    if str(path) == "" or dest.name in ("", ".", ".."):
        raise DestinationError(f"{what} {str(path)!r}: not a file name")
    try:
        lst = os.lstat(dest)
    except FileNotFoundError:
        lst = None
    except OSError as exc:  # ENOTDIR (a file used as a folder), ENAMETOOLONG, ELOOP, EACCES
        raise DestinationError(f"{what} {dest}: {_strerror(exc)}") from None
    if lst is not None:
        if stat.S_ISLNK(lst.st_mode):
            try:
                st = os.stat(dest)
            except OSError:
                st = None  # dangling: the link itself is replaced
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise DestinationError(f"{what} {dest}: is a symlink to {_kind(st.st_mode)}; refusing to replace it")
        elif not stat.S_ISREG(lst.st_mode):
            raise DestinationError(f"{what} {dest}: is {_kind(lst.st_mode)}, not a regular file; "
                                   "refusing to replace it")
    if _probe_parent:
        _check_parent(dest, parents, what)
    if len(os.fsencode(dest.name + dest.suffix)) + 14 > 255:
        # The temporary sibling (NAME.XXXXXXXX.tmpSUFFIX) must fit NAME_MAX too.
        raise DestinationError(f"{what} {dest}: file name too long")
    return dest


def check_output_dir(path: str | os.PathLike[str], what: str = "output directory",
                     parents: bool | None = None, follow_links: bool = False) -> Path:
    """Refuse ``path`` as a directory destination unless it is new or an existing, writable directory.

    A symlink is refused (our choice, as for files: a link planted in a shared folder must not
    redirect a tree of writes) unless ``follow_links`` (a configured store, such as mlflow's).
    """
    dest = Path(path)
    if str(path) == "":
        raise DestinationError(f"{what}: empty path")
    try:
        if not follow_links and stat.S_ISLNK(os.lstat(dest).st_mode):
            raise DestinationError(f"{what} {dest}: is a symlink; output directories are never followed "
                                   "through links (give the real path)")
        st = os.stat(dest)  # follows links where allowed: a link to a directory is a directory there
    except FileNotFoundError:
        if os.path.lexists(dest):
            raise DestinationError(f"{what} {dest}: is a dangling symlink") from None
        st = None
    except OSError as exc:
        raise DestinationError(f"{what} {dest}: {_strerror(exc)}") from None
    if st is None:
        _check_parent(dest, parents, what)
        return dest
    if not stat.S_ISDIR(st.st_mode):
        raise DestinationError(f"{what} {dest}: exists and is {_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else 'a file'}, "
                               "not a directory")
    _probe(dest, dest, what)
    return dest


def ensure_dir(path: str | os.PathLike[str], what: str = "output directory", parents: bool | None = None) -> Path:
    """``check_output_dir`` and then create the directory (its parents only as allowed)."""
    dest = check_output_dir(path, what, parents)
    make = _MAKE_PARENTS if parents is None else parents
    try:
        dest.mkdir(parents=make, exist_ok=True)
    except OSError as exc:
        raise DestinationError(f"{what} {dest}: {_strerror(exc)}") from None
    return dest


def check_model_destination(path: str | os.PathLike[str], what: str = "model directory",
                            marker: str = "meta.json") -> Path:
    """Where a whole directory (a trained model) may be written or replaced; parents made as allowed.

    Refused: a path inside an existing model directory (``--out model1/weights.npz``
    would turn a file of model1 into a directory and break it), and an existing
    directory that is neither empty nor a model directory (``--out ~`` must never
    replace a home directory). A model directory is one holding ``marker``.
    """
    dest = Path(path)
    for anc in Path(os.path.abspath(dest)).parents:
        if (anc / marker).is_file():
            raise DestinationError(f"{what} {dest}: is inside the model directory {anc}; "
                                   "give a path outside it")
    check_output_dir(dest, what)
    if dest.is_dir() and not (dest / marker).is_file() and any(dest.iterdir()):
        raise DestinationError(f"{what} {dest}: exists and is not a model directory (no {marker}); "
                               "refusing to replace it")
    if not dest.parent.exists():
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)  # check_output_dir allowed it (--mkdir)
        except OSError as exc:
            raise DestinationError(f"{what} {dest}: {_strerror(exc)}") from None
    return dest


def _default_mode() -> int:
    # mkstemp creates 0600; results are meant to be shared, so honour the umask like open() does.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], mode: int | None = None, parents: bool | None = None,
                what: str = "output") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``, on error it is removed.

    ``path`` must pass :func:`check_output_file` (checked on entry and again
    just before the rename). ``mode`` sets the final permissions (default:
    0666 minus the umask; pass 0o600 for secrets). ``parents``: create
    missing parent directories (default: the process setting, off).
    """
    dest = check_output_file(path, what, parents)
    if _owner_of(dest) is not None:
        # In a folder a run owns, a planted link or a second hard link is refused, not replaced.
        check_member(dest, what)
    make = _MAKE_PARENTS if parents is None else parents
    try:
        if make:
            dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".tmp" + dest.suffix, dir=dest.parent)
    except OSError as exc:
        raise DestinationError(f"{what} {dest}: {_strerror(exc)}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _default_mode() if mode is None else mode)
        check_output_file(dest, what, parents=False, _probe_parent=False)  # it may have changed while we worked
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None,
                       parents: bool | None = None) -> Path:
    with atomic_path(path, mode, parents) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None,
                      parents: bool | None = None) -> Path:
    with atomic_path(path, mode, parents) as tmp:
        tmp.write_text(text)
    return Path(path)


# -- directories replaced as a whole (model directories) -------------------------------

_RENAME_EXCHANGE = 2
_libc: Any = None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.renameat2  # noqa: B018 - glibc >= 2.28
        except (OSError, AttributeError):
            _libc = False
    if _libc is False:
        return False
    at_fdcwd = -100
    rc = _libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(tmp: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Put the complete directory ``tmp`` at ``final``; an old ``final`` (a directory) is removed.

    Where the file system allows it the two are swapped in one atomic step,
    so ``final`` is always either the old or the new directory; the old one
    (now at ``tmp``) is then deleted. Nothing named after ``final`` is left
    behind, also when the removal of the old tree fails part way (the error
    is raised after the new directory is in place). Callers check that
    replacing ``final`` is wanted (:func:`check_output_dir`, and e.g. that it
    is a model directory) -- this function refuses only non-directories.
    """
    tmp, final = Path(tmp), Path(final)
    if final.is_symlink() or (final.exists() and not final.is_dir()):
        raise DestinationError(f"{final}: exists and is not a directory; refusing to replace it")
    if not final.exists():
        os.replace(tmp, final)
        return final
    if not _exchange(tmp, final):
        # Fallback: move the old one aside under the temporary name's sibling, then swap.
        old = tmp.with_name(tmp.name + ".old")
        os.replace(final, old)
        try:
            os.replace(tmp, final)
        except BaseException:
            os.replace(old, final)
            raise
        tmp = old
    shutil.rmtree(tmp)
    return final


# -- inputs -------------------------------------------------------------------------


def check_input_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` exists and is a regular file (or a link to one); one line naming it otherwise."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {p}") from None
    except OSError as exc:
        raise ValueError(f"{what} {p}: {_strerror(exc)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} {p}: is {_kind(st.st_mode)}, not a regular file")
    return p


def read_text_input(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> str:
    """The UTF-8 text of a regular file; binary, huge (``limits.MAX_TEXT_BYTES`` unless ``max_bytes``)
    or unreadable files get one line naming the file."""
    from .limits import MAX_TEXT_BYTES

    max_bytes = MAX_TEXT_BYTES if max_bytes is None else max_bytes
    if _owner_of(Path(path)) is not None:
        # A file of a folder this run owns (a results.json read back): never through a link.
        data = read_member(path, what, max_bytes)
        if data is None:
            raise FileNotFoundError(f"{what} not found: {path}")
        return _decode_text(data, what, Path(path))
    p = Path(path)
    return _decode_text(read_bytes_input(p, what, max_bytes), what, p)


def read_bytes_input(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> bytes:
    """The input gate: the bytes of ``path``, which must be a regular file (checked before it is opened,
    and again on the descriptor: a FIFO never blocks, ``/dev/zero`` is never read) of at most
    ``max_bytes`` (default ``limits.MAX_TEXT_BYTES``; checked before the read, and the read stops
    there). Every path a command line, a config file or a plant option names is read through here;
    one line naming ``what`` and the path otherwise."""
    from .limits import MAX_TEXT_BYTES

    limit = MAX_TEXT_BYTES if max_bytes is None else max_bytes
    p = check_input_file(path, what)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise ValueError(f"{what} {p}: {_strerror(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{what} {p}: is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{what} {p}: {st.st_size} bytes is too large for this input (limit {limit})")
        os.set_blocking(fd, True)
        return read_fd(fd, limit, f"{what} {p}")
    except OSError as exc:
        raise ValueError(f"{what} {p}: {_strerror(exc)}") from None
    finally:
        os.close(fd)


def _decode_text(data: bytes, what: str, p: Path) -> str:
    if b"\x00" in data:
        raise ValueError(f"{what} {p}: binary data, not a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {p}: not UTF-8 text (byte {exc.start})") from None


def load_npz(path: str | os.PathLike[str], what: str = "weights file") -> dict[str, Any]:
    """Every array of an ``.npz`` file; truncated, random or pickled content gets one line naming the file."""
    import numpy as np

    p = check_input_file(path, what)
    try:
        z = np.load(p, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, ValueError) as exc:
        # numpy reports non-zip bytes as "pickled data"; say what the file is instead.
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "pickled data" in msg or "allow_pickle" in msg:
            msg = "not a NumPy .npz archive"
        raise ValueError(f"{what} {p}: unreadable ({msg})") from None


def _long_toml_key(limit: int) -> re.Pattern[str]:
    """A quoted TOML key longer than ``limit`` characters: a string followed by what follows a key
    (``=``, ``.`` or ``]``); only a key's closing quote is followed so."""
    n = str(limit + 1)
    return re.compile(r'"(?:[^"\\\n]|\\.){' + n + r',}"[ \t]*[=.\]]|\'[^\'\n]{' + n + r',}\'[ \t]*[=.\]]')


def prescan_json(text: str | bytes, what: str) -> None:
    """Bound a JSON document before it is parsed: its size (``limits.MAX_TEXT_BYTES``), its nesting
    (``MAX_DEPTH``, brackets outside strings: Python's parser recurses per level and a deep document
    ends in RecursionError, after allocating every level) and its keys' length (``MAX_KEY_CHARS``).
    One-line ``ValueError`` naming ``what``. Regular expressions and NumPy do the scanning, so it
    costs less than the parse it guards."""
    from .limits import MAX_DEPTH, MAX_KEY_CHARS, MAX_TEXT_BYTES

    if len(text) > MAX_TEXT_BYTES:
        raise ValueError(f"{what}: {len(text)} bytes is more than a JSON document may hold ({MAX_TEXT_BYTES})")
    raw = text.encode("utf-8", errors="replace") if isinstance(text, str) else bytes(text)
    if b"[" not in raw and b"{" not in raw:
        return
    _json_scan(raw, what, MAX_DEPTH, MAX_KEY_CHARS)


def _bracket_table() -> Any:
    import numpy as np

    t = np.zeros(256, dtype=np.int8)
    t[[0x5B, 0x7B]] = 1
    t[[0x5D, 0x7D]] = -1
    return t


_BRACKETS: Any = None


def _json_scan(raw: bytes, what: str, max_depth: int, max_key: int) -> None:
    """Nesting and key length of JSON bytes, vectorised (NumPy): which bytes lie inside strings
    follows from the unescaped quotes; brackets outside them are summed; a string longer than
    ``max_key`` followed by ``:`` is a key too long. Hand-written because no parser bounds these
    before it allocates; NumPy keeps it a few passes over the bytes."""
    import numpy as np

    global _BRACKETS
    if _BRACKETS is None:
        _BRACKETS = _bracket_table()
    b = np.frombuffer(raw, dtype=np.uint8)
    q = np.flatnonzero(b == 0x22)
    if q.size:
        esc = q[(q > 0) & (b[np.maximum(q - 1, 0)] == 0x5C)]
        if esc.size:  # a quote after a backslash: escaped if an odd run of backslashes precedes it
            drop = []
            for i in esc.tolist():
                j = i - 1
                while j >= 0 and raw[j] == 0x5C:
                    j -= 1
                if (i - 1 - j) % 2:
                    drop.append(i)
            q = np.setdiff1d(q, np.asarray(drop, dtype=q.dtype)) if drop else q
    step = _BRACKETS[b]
    at = np.flatnonzero(step)
    at = at[(np.searchsorted(q, at) & 1) == 0]  # an even number of quotes before it: outside strings
    if at.size and int(np.cumsum(step[at], dtype=np.int64).max()) > max_depth:
        raise ValueError(f"{what}: nested deeper than {max_depth} levels")
    if q.size >= 2:
        opens, closes = q[0:q.size - 1:2], q[1::2]
        for o, c in zip(opens[closes - opens - 1 > max_key].tolist(), closes[closes - opens - 1 > max_key].tolist(),
                        strict=True):
            rest = raw[c + 1:c + 65].lstrip()
            if rest.startswith(b":"):
                raise ValueError(f"{what}: a key of {c - o - 1} bytes (at most {max_key})")


def _check_nesting(bare: str, what: str, limit: int) -> None:
    """Refuse text (strings and comments already removed) whose brackets nest deeper than ``limit``."""
    import numpy as np

    b = np.frombuffer(bare.encode("utf-8", errors="replace"), dtype=np.uint8)
    step = np.isin(b, (0x5B, 0x7B)).astype(np.int64) - np.isin(b, (0x5D, 0x7D)).astype(np.int64)
    if step.size and int(np.cumsum(step).max()) > limit:
        raise ValueError(f"{what}: nested deeper than {limit} levels")


def parse_json(text: str | bytes, what: str) -> Any:
    """JSON ``text`` (from ``what``, e.g. a file name) with one-line errors: malformed, or bigger,
    deeper or with longer keys than the limits (:func:`prescan_json`, checked before parsing)."""
    import json

    from .limits import check_depth

    prescan_json(text, what)
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what}: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what}: invalid JSON ({str(exc).splitlines()[0][:120]})") from None
    return check_depth(doc, what)


def read_json_input(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> Any:
    """The JSON document in a regular file: size, encoding, syntax and depth checked, one line naming it."""
    return parse_json(read_text_input(path, what, max_bytes), f"{what} {path}")


# Strings and comments of a TOML document: their insides are neither keys nor brackets.
_TOML_STRING = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')
# A key: at a line's start or after an inline table's "{" or ",", up to its "=".
_TOML_KEY = re.compile(r"(?:^|(?<=[{,]))[ \t]*([^=\n{},\[\]]+?)[ \t]*=", re.M)
_TOML_HEADER = re.compile(r"^[ \t]*\[\[?([^\]\n]*)\]", re.M)


def prescan_toml(text: str, what: str) -> None:
    """Bound a TOML document before ``tomllib`` builds anything: nesting (``MAX_DEPTH``), keys
    (``MAX_KEYS``), parts of one dotted key (``MAX_DEPTH``), dots of all of them (``MAX_KEY_DOTS``:
    tomllib's memory grows with the square of a dotted key's parts) and key length
    (``MAX_KEY_CHARS``). Callers bound the size when reading. One-line ``ValueError`` naming ``what``."""
    from .limits import MAX_DEPTH, MAX_KEY_CHARS, MAX_KEY_DOTS, MAX_KEYS

    m = _long_toml_key(MAX_KEY_CHARS).search(text)
    if m is not None:
        raise ValueError(f"{what}: a quoted key of more than {MAX_KEY_CHARS} characters")
    bare = _TOML_STRING.sub(lambda t: "" if t.group().startswith("#") else "s", text)
    keys = _TOML_KEY.findall(bare) + _TOML_HEADER.findall(bare)
    if len(keys) > MAX_KEYS:
        raise ValueError(f"{what}: {len(keys)} keys and tables (at most {MAX_KEYS})")
    longest = max(keys, key=len, default="")
    if len(longest) > MAX_KEY_CHARS:
        raise ValueError(f"{what}: a key of {len(longest)} characters (at most {MAX_KEY_CHARS})")
    parts = max((k.count(".") for k in keys), default=0) + 1
    if parts > MAX_DEPTH:
        raise ValueError(f"{what}: a dotted key of {parts} parts nests deeper than {MAX_DEPTH} levels")
    dots = sum(k.count(".") for k in keys)
    if dots > MAX_KEY_DOTS:
        raise ValueError(f"{what}: {dots} dots in its keys (at most {MAX_KEY_DOTS})")
    _check_nesting(_TOML_HEADER.sub("", bare), what, MAX_DEPTH)


def parse_toml(text: str, what: str) -> dict[str, Any]:
    """TOML ``text`` with one-line errors, pre-scanned (:func:`prescan_toml`) before it is parsed and
    depth checked after, as for :func:`parse_json`."""
    import tomllib

    from .limits import check_depth

    prescan_toml(text, what)
    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise ValueError(f"{what}: nested too deeply") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{what}: invalid TOML ({exc})") from None
    return check_depth(doc, what)


def open_append(path: str | os.PathLike[str], what: str = "log") -> Any:
    """Open ``path`` for appending text, never through a symlink (``O_NOFOLLOW``) and only if it is
    (or becomes) a regular file: a link's target is never written, a FIFO never blocks."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DestinationError(f"{what} {p}: is a symlink; appends never follow links") from None
        raise DestinationError(f"{what} {p}: {_strerror(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DestinationError(f"{what} {p}: is {_kind(st.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", buffering=1, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def strict_json(obj: Any, **kw: Any) -> str:
    """JSON text with every non-finite float (NaN, inf, also NumPy's) written as null (a model's
    meta.json once held ``NaN``, which is not JSON); an object JSON cannot write becomes its ``str``
    unless ``default`` says otherwise. The cleaning is :func:`scidmz.strictjson.clean`."""
    from .strictjson import dumps

    kw.setdefault("default", str)
    return dumps(obj, **kw)


# -- files inside a folder a run writes, and the run's lock on it ---------------------
#
# A run folder (leaderboard, reproduce, evaluate, tune, the saturator study) holds files that
# scidmz both writes and reads back: ledger.jsonl, command.txt, results.json, report.md, ...
# Anyone who can write in the folder could plant a link there, and a root run that followed it
# would read a foreign file (and copy it into a world-readable one) or truncate one. So every
# such member is opened with O_NOFOLLOW, must be a regular file of its own (one hard link: a
# second name could be a file outside), and is checked before a byte is written or cut.

#: The lock file a run holds (flock, exclusive) in its output folder for its whole life.
LOCK_NAME = ".scidmz.lock"
#: Flags every member open uses: never through a link, never blocking on a FIFO, never a tty.
_MEMBER_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class FolderBusy(ValueError):
    """Another run holds the output folder's lock (one line; the CLI answers exit 2)."""


def _member_problem(st: os.stat_result) -> str | None:
    """Why a member with this ``lstat``/``fstat`` must not be opened, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink; files in an output folder are never opened through links"
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a regular file"
    if st.st_nlink != 1:
        return (f"has {st.st_nlink} hard links; a file in an output folder must be its own "
                "(another name may be a file outside the folder)")
    return None


def check_member(path: str | os.PathLike[str], what: str = "output folder file") -> os.stat_result | None:
    """``lstat`` of a file in an output folder, None if absent; ``DestinationError`` (one line naming
    it) if it is a link, not a regular file, or has more than one hard link."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DestinationError(f"{what} {p}: {_strerror(exc)}") from None
    why = _member_problem(st)
    if why is not None:
        raise DestinationError(f"{what} {p}: {why}")
    return st


def open_member(path: str | os.PathLike[str], flags: int, what: str = "output folder file",
                mode: int = 0o644) -> int:
    """A descriptor on a file of an output folder: ``O_NOFOLLOW`` (a link is refused, its target never
    opened), non-blocking while opened (a FIFO cannot hang it), then checked by ``fstat`` to be a
    regular file with one link. ``flags`` must not hold ``O_TRUNC``: a member is cut only after the
    caller checked it (``os.ftruncate``). One-line ``DestinationError`` naming the file otherwise;
    ``FileNotFoundError`` when it is absent and ``flags`` do not create it."""
    if flags & os.O_TRUNC:
        raise ValueError("open_member: O_TRUNC cuts before the check; use os.ftruncate after it")
    p = Path(path)
    owner, parts = _owned_root(p)
    try:
        if owner is not None:
            fd = _open_below(owner, parts, flags | _MEMBER_FLAGS, mode)
        else:
            fd = os.open(p, flags | _MEMBER_FLAGS, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DestinationError(f"{what} {p}: is a symlink; files in an output folder are never "
                                   "opened through links") from None
        if exc.errno == errno.EEXIST:
            raise DestinationError(f"{what} {p}: appeared while this run was starting; "
                                   "another process writes in this folder") from None
        raise DestinationError(f"{what} {p}: {_strerror(exc)}") from None
    try:
        why = _member_problem(os.fstat(fd))
        if why is not None:
            raise DestinationError(f"{what} {p}: {why}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, limit: int, what: str) -> bytes:
    """All bytes of the open regular file ``fd``, refused (one line) past ``limit`` bytes: the size is
    checked before the read, and the read stops at ``limit + 1`` in case the file grew."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise ValueError(f"{what}: {size} bytes is more than the {limit} this file may hold")
    chunks, got = [], 0
    while got <= limit:
        b = os.read(fd, min(1 << 20, limit + 1 - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    if got > limit:
        raise ValueError(f"{what}: grew past the {limit} bytes this file may hold while being read")
    return b"".join(chunks)


def read_member(path: str | os.PathLike[str], what: str = "output folder file",
                max_bytes: int | None = None) -> bytes | None:
    """The bytes of a file in an output folder (``open_member`` rules, at most ``max_bytes``,
    default ``limits.MAX_TEXT_BYTES``); None if it does not exist."""
    from .limits import MAX_TEXT_BYTES

    try:
        fd = open_member(path, os.O_RDONLY, what)
    except FileNotFoundError:
        return None
    try:
        return read_fd(fd, MAX_TEXT_BYTES if max_bytes is None else max_bytes, f"{what} {path}")
    finally:
        os.close(fd)


class OwnedFolder:
    """An output folder a run owns: its directory opened without following links, and an exclusive
    ``flock`` on ``LOCK_NAME`` inside it, held until :meth:`release`. Made by :func:`own_folder`."""

    def __init__(self, path: Path, dir_fd: int, lock_fd: int, made: bool = False) -> None:
        self.path = path
        self.dir_fd = dir_fd
        self.lock_fd = lock_fd
        self.made = made  # own_folder made the folder: removed at release if the run left it empty
        self.holds = 1  # nested own_folder calls of one process share the lock

    def check_members(self, names: list[str], what: str = "--out") -> None:
        """Refuse the run (one line naming the first) if any of ``names`` in the folder is a link,
        not a regular file, or has a second hard link: checked before the run writes anything."""
        for name in names:
            check_member(self.path / name, what)

    def release(self) -> None:
        self.holds -= 1
        if self.holds:
            return
        _OWNED.pop(self.path, None)
        # Removed while still locked, so the folder keeps nothing of the run's lock; a run that
        # opened the old file meanwhile finds it unlinked after its flock and tries again (_lock).
        with contextlib.suppress(OSError):
            os.unlink(LOCK_NAME, dir_fd=self.dir_fd)
        os.close(self.lock_fd)  # closing the last descriptor drops the flock
        os.close(self.dir_fd)
        if self.made:
            # A run refused after the folder was made (a bad option found by a later check)
            # leaves nothing behind; rmdir removes only an empty folder.
            with contextlib.suppress(OSError):
                os.rmdir(self.path)


#: The folders this process owns, by absolute path (``own_folder``).
_OWNED: dict[Path, OwnedFolder] = {}


def _owner_of(p: Path) -> OwnedFolder | None:
    """The owned folder ``p`` lies in (at any depth), or None."""
    return _owned_root(p)[0]


def _owned_root(p: Path) -> tuple[OwnedFolder | None, tuple[str, ...]]:
    """(the owned folder ``p`` lies in, the path's parts below it), or (None, ())."""
    if not _OWNED:
        return None, ()
    full = Path(os.path.abspath(p))
    for anc in full.parents:
        owner = _OWNED.get(anc)
        if owner is not None:
            return owner, full.relative_to(anc).parts
    return None, ()


def _open_below(owner: OwnedFolder, parts: tuple[str, ...], flags: int, mode: int) -> int:
    """``openat`` one component at a time from the owned folder, each with ``O_NOFOLLOW``: a
    sub-folder swapped for a link is refused like a file (ELOOP)."""
    cur = owner.dir_fd
    opened: list[int] = []
    try:
        for part in parts[:-1]:
            cur = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            opened.append(cur)
        return os.open(parts[-1], flags, mode, dir_fd=cur)
    finally:
        for fd in opened:
            os.close(fd)


def _busy_message(lock_fd: int, folder: Path, what: str) -> str:
    try:
        os.lseek(lock_fd, 0, os.SEEK_SET)
        pid = os.read(lock_fd, 32).decode("ascii", "replace").strip()
    except OSError:
        pid = ""
    who = f"another scidmz run (pid {pid})" if pid.isdigit() else "another scidmz run"
    return f"{what} {folder}: {who} is using this folder; wait for it to end, or give another {what}"


def _lock(dir_fd: int, folder: Path, what: str) -> int:
    """The exclusive flock on the folder's lock file, as a descriptor; ``FolderBusy`` if held."""
    for _ in range(10):
        fd = _try_lock(dir_fd, folder, what)
        if fd is not None:
            return fd
    raise FolderBusy(f"{what} {folder}: its lock file {LOCK_NAME} keeps being replaced; "
                     "another process is using this folder")


def _try_lock(dir_fd: int, folder: Path, what: str) -> int | None:
    """The lock's descriptor; None if the file was removed or replaced between open and flock (its
    holder ended): the caller opens the new one."""
    import fcntl

    try:
        fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | _MEMBER_FLAGS, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        why = "is a symlink" if exc.errno == errno.ELOOP else _strerror(exc)
        raise DestinationError(f"{what} {folder}: lock file {LOCK_NAME} {why}") from None
    try:
        why = _member_problem(os.fstat(fd))
        if why is not None:
            raise DestinationError(f"{what} {folder}: lock file {LOCK_NAME} {why}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(_busy_message(fd, folder, what)) from None
        try:
            now = os.stat(LOCK_NAME, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        mine = os.fstat(fd)
        if now is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(fd)
            return None
        os.ftruncate(fd, 0)  # ours now: say who holds it, for the next run's message
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def own_folder(path: str | os.PathLike[str], what: str = "--out", members: list[str] | None = None,
               create: bool = True) -> Iterator[OwnedFolder | None]:
    """Own the output folder ``path`` for the ``with`` block: make it (``ensure_dir`` rules) unless
    ``create`` is false (then a folder that does not exist yields None: nothing to own, the caller
    says what is missing), open it without following a link, take the exclusive lock
    (``FolderBusy``, one line, if another run holds it) and check ``members``
    (:meth:`OwnedFolder.check_members`).
    Inside the block, :func:`open_member` and :func:`read_member` open its files relative to the
    directory opened here, so a folder swapped for a link meanwhile is not followed either.
    Nested calls for the same folder in one process share the lock."""
    made = create and not os.path.lexists(path)
    folder = Path(os.path.abspath(ensure_dir(path, what) if create else Path(path)))
    held = _OWNED.get(folder)
    if held is not None:
        held.holds += 1
        try:
            held.check_members(list(members or []), what)
            yield held
        finally:
            held.release()
        return
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        yield None
        return
    except OSError as exc:
        why = "is a symlink; output folders are never followed through links" if exc.errno == errno.ELOOP \
            else _strerror(exc)
        raise DestinationError(f"{what} {folder}: {why}") from None
    try:
        lock_fd = _lock(dir_fd, folder, what)
    except BaseException:
        os.close(dir_fd)
        raise
    owned = OwnedFolder(folder, dir_fd, lock_fd, made)
    _OWNED[folder] = owned
    try:
        owned.check_members(list(members or []), what)
        yield owned
    finally:
        owned.release()
