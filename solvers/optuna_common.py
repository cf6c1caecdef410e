"""What the Optuna methods and their shared-study workers both use: the trial attributes,
the search space of the decision (box, simplex or softmax coordinates), storage URLs and a
quiet Optuna context."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np

from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.tracking import Problem

if TYPE_CHECKING:  # imported where a study is used: the commands that read STORAGE_ENV need no Optuna
    import optuna

MIX_ATTR, COVERAGE_ATTR, FEASIBLE_ATTR = "mix", "coverage", "feasible"


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Silence Optuna's per-trial INFO logs and experimental warnings for the run only."""
    import optuna

    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(previous)


STORAGE_ENV = "EDGEPREFIX_STORAGE"  # storage URL read when --storage is not given (keeps passwords off argv)
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
URL_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg2")


def storage_url(path: str | Path) -> str:
    """SQLAlchemy URL of a study storage: a SQLite file path (``*.db``, ``*.sqlite``, its folder is
    created) or a ``sqlite:///`` / ``postgresql://`` URL; a bare ``postgresql://`` gets the
    ``psycopg2`` driver (the ``distributed`` extra).  Anything else raises one line, before any
    work, with the password hidden (never a silent new file)."""
    text = str(path)
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        if scheme not in URL_SCHEMES:
            raise ValueError(f"storage {redact(text)!r}: unknown scheme {scheme!r} (use sqlite:///FILE or postgresql://USER@HOST/DB)")
        if scheme.startswith("postgres"):
            _check_server_url(text)
            from edgeprefix.solvers.extras import require

            require("psycopg2", f"storage {redact(text)!r}")
        if scheme in ("postgresql", "postgres"):
            return "postgresql+psycopg2://" + text.split("://", 1)[1]
        return text
    if not text or Path(text).suffix.lower() not in SQLITE_SUFFIXES:
        raise ValueError(
            f"storage {text!r}: neither a database URL (sqlite:///FILE, postgresql://USER@HOST/DB) "
            f"nor a SQLite file ending in {', '.join(SQLITE_SUFFIXES)}"
        )
    target = Path(text).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{target}"


def _check_server_url(text: str) -> None:
    """A PostgreSQL URL's port, if it names one, is a number (libpq defaults the rest)."""
    host = text.split("://", 1)[1].partition("/")[0].rpartition("@")[2]
    if host.startswith("["):  # [IPv6]:port
        host = host.partition("]")[2]
    _, colon, port = host.rpartition(":")
    if colon and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"storage {redact(text)!r}: port {port!r} is not a number from 1 to 65535")


SECRET_KEYS = ("password", "passwd", "pwd", "sslpassword", "secret", "token")
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:" + "|".join(SECRET_KEYS) + r")=)([^&#;]*)")


def secrets_of(url: str) -> list[str]:
    """The secret parts of ``url``: the password of ``user:password@`` and query values such as ``password=``."""
    text = str(url)
    found = [m.group(2) for m in _QUERY_SECRET.finditer(text) if m.group(2)]
    if "://" in text:
        userinfo, at, _ = text.split("://", 1)[1].partition("/")[0].rpartition("@")
        if at and ":" in userinfo and userinfo.split(":", 1)[1]:
            found.append(userinfo.split(":", 1)[1])
    decoded = [unquote(s) for s in found]
    return sorted({s for s in found + decoded if s}, key=len, reverse=True)


def redact(url: str) -> str:
    """``url`` (a storage URL or a Dask address) with its secrets replaced by ``***`` (for messages and logs)."""
    text = str(url)
    text = _QUERY_SECRET.sub(lambda m: m.group(1) + ("***" if m.group(2) else ""), text)
    if "://" in text:
        scheme, rest = text.split("://", 1)
        netloc, slash, tail = rest.partition("/")
        userinfo, at, host = netloc.rpartition("@")
        if at and ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
        text = f"{scheme}://{netloc}{slash}{tail}"
    return text


def scrub(message: str, url: str) -> str:
    """``message`` with every secret of ``url`` replaced by ``***`` (a driver's error may echo them)."""
    for secret in secrets_of(url):
        message = message.replace(secret, "***")
    return message


def open_rdb(url: str, cls: Any = None, **kwargs: Any) -> optuna.storages.RDBStorage:
    """``optuna.storages.RDBStorage(url)``; an unreachable, unauthorised or driverless database is a
    one-line :class:`ValueError` naming the (redacted) URL.  A schema creation that collides with another
    program's (an :class:`sqlalchemy.exc.IntegrityError`) is retried once: the tables exist by then."""
    import optuna
    import sqlalchemy.exc

    opener = cls or optuna.storages.RDBStorage
    try:
        try:
            return opener(url, **kwargs)
        except sqlalchemy.exc.IntegrityError:
            # another program (a dashboard, a reader) created Optuna's tables at the same moment; they exist now
            return opener(url, **kwargs)
    except (sqlalchemy.exc.SQLAlchemyError, ImportError, OSError) as exc:
        reason = scrub(str(getattr(exc, "orig", None) or exc), url).strip().splitlines()
        raise ValueError(
            f"storage {redact(url)!r}: cannot open the study database ({reason[0] if reason else type(exc).__name__})"
        ) from None


def check_study_name(name: str) -> str:
    """A study name: non-empty printable text."""
    if not isinstance(name, str) or not name.strip() or not name.isprintable():
        raise ValueError(f"study name (--study) must be non-empty printable text, got {name!r}")
    return name


@dataclass(frozen=True)
class SearchBox:
    """The bounding box ``[lower, upper]`` of the decision ``z`` (shape ``(n,)``) that samplers explore."""

    lower: np.ndarray
    upper: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, problem: Problem, projection: Projection) -> SearchBox:
        cons = projection.constraints
        k = problem.dimension
        lower = np.where(np.isfinite(cons.lower[:k]), cons.lower[:k], 0.0)
        upper = np.where(np.isfinite(cons.upper[:k]), cons.upper[:k], 1.0)
        return cls(lower, upper, tuple(problem.variable_names))

    def suggest(self, trial: optuna.Trial) -> np.ndarray:
        """``z`` proposed by ``trial``: one ``z_<profile>`` parameter per free coordinate."""
        z = self.lower.copy()
        for i in np.flatnonzero(self.upper > self.lower):
            z[i] = trial.suggest_float(f"z_{self.names[i]}", float(self.lower[i]), float(self.upper[i]))
        return z


SPACES = ("box", "simplex", "softmax")
SOFTMAX_RANGE = 7.0  # softmax coordinates v ∈ [−L, L]: shares span a factor e^{2L} ≈ 1.2e6
SNAP = 1e-3  # simplex and softmax proposals: shares below SNAP / |free| become exactly 0


@dataclass(frozen=True)
class SearchSpace:
    """Where a sampler proposes, and the point (to be projected) a proposal stands for.

    * ``box`` — ``z_<profile>`` in ``[lower, upper]``, the point is ``z`` itself.  The Euclidean
      projection of a box sample zeroes every share below a threshold, so most proposals land on
      low-dimensional faces and the many ``z`` mapping to one boundary point make flat plateaus.
    * ``simplex`` — ``u_<profile>`` in ``[0, 1]``; ``e = −log(1 − u)`` (the Exp(1) quantile) normalised
      to ``w = e / Σ e``: uniform ``u`` gives the uniform distribution on the simplex of the shares
      allowed to be positive, so every face is sampled in proportion to its size.
    * ``softmax`` — ``v_<profile>`` in ``[−L, L]`` (:data:`SOFTMAX_RANGE`), ``w ∝ e^{v}``: a smooth,
      log-scaled map for samplers that adapt a Gaussian (CMA-ES), the box centre being the uniform mix.

    For ``simplex`` and ``softmax`` shares below :data:`SNAP` ``/ |free|`` are set to 0 (so faces with
    zero shares have proposals of positive measure), and the projection then adds the budget,
    fallback floor and caps.  Parameter names differ by space, so a stored study is never read in
    another space.
    """

    kind: str
    box: SearchBox

    @classmethod
    def of(cls, kind: str, problem: Problem, projection: Projection) -> SearchSpace:
        if kind not in SPACES:
            raise ValueError(f"space: unknown search space {kind!r} (valid: {list(SPACES)})")
        return cls(kind, SearchBox.of(problem, projection))

    def suggest(self, trial: optuna.Trial) -> np.ndarray:
        """The point proposed by ``trial`` (still to be projected)."""
        box = self.box
        if self.kind == "box":
            return box.suggest(trial)
        free = np.flatnonzero(box.upper > 0)
        if self.kind == "simplex":
            u = np.array([trial.suggest_float(f"u_{box.names[i]}", 0.0, 1.0) for i in free])
            weight = -np.log1p(-np.minimum(u, 1.0 - 1e-16))
        else:
            v = np.array([trial.suggest_float(f"v_{box.names[i]}", -SOFTMAX_RANGE, SOFTMAX_RANGE) for i in free])
            weight = np.exp(v - v.max())
        total = weight.sum()
        shares = weight / total if total > 0 else np.full(free.size, 1.0 / free.size)
        shares = np.where(shares < SNAP / free.size, 0.0, shares)
        point = np.zeros(box.lower.size)
        point[free] = shares / shares.sum()
        return point
