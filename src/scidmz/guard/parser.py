"""argparse with usage errors as one line (argparse prints the usage block first; ``--help`` is
where the usage lives)."""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["OneLineArgumentParser"]


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors as one line: ``scidmz simulate: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        msg = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {msg} (see {self.prog} --help)\n")
