"""What every durable, hand-editable store under ``<data-dir>/config/`` shares.

| store | its documents | what is in force |
|---|---|---|
| ``subscriptions.store.ConfigStore`` | ``client-metrics.yaml``, ``quotas.yaml`` | a ``ConfigSnapshot`` |
| ``collector.security.acls_file.DurableAclStore`` | ``acls.yaml`` | the ``AclStore`` it is |
| ``collector.security.credentials_file.DurableCredentialStore`` | ``scram-credentials.yaml`` | the ``CredentialStore`` it is |

Each document is a ``subscriptions.config_file.ConfigDocument`` (parsed whole, written
atomically: temp file, fsync, rename, directory fsync).  The store over it, this module's
:class:`DurableConfigStore`, keeps the directory, the last reload's error and the hot
reload: :meth:`~DurableConfigStore.watch_directory` re-reads the store whenever the
directory changes (``subscriptions.config_watch``), and SIGHUP calls ``reload``.  A store
kept in one document is a :class:`DurableDocumentStore`, which also has the reload itself:
a document that does not validate is logged and ignored (its last good content stays in
force, ``last_error`` says why).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from subscriptions.config_file import ConfigDocument, ConfigFileError
from subscriptions.config_watch import watch_config_dir

__all__ = ["DurableConfigStore", "DurableDocumentStore", "OnReload"]

log = logging.getLogger(__name__)

State = TypeVar("State")

# Called after a reload that changed what is in force (may be a coroutine function).
OnReload = Callable[[], Awaitable[None] | None]


def _nothing() -> None:
    return None


class DurableConfigStore(abc.ABC):
    """A store kept in ``<data_dir>/config``: the directory (made if missing), the errors
    of the latest reload, and the watch that reloads it."""

    def __init__(self, data_dir: str | Path) -> None:
        self.config_dir = Path(data_dir) / "config"
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.last_error: str | None = None

    @abc.abstractmethod
    def reload(self) -> bool:
        """Re-read the store's documents (SIGHUP); True if what is in force changed."""

    async def watch_directory(
        self,
        on_change: OnReload = _nothing,
        stop_event: asyncio.Event | None = None,
        *,
        debounce_ms: int = 300,
        force_polling: bool | None = None,
        ready: asyncio.Event | None = None,
    ) -> None:
        """Reload whenever something in the config directory changes, then call
        ``on_change`` if that changed what is in force.  Runs until ``stop_event`` is set
        (or the task is cancelled); ``ready`` is set once the directory is watched."""
        await watch_config_dir(
            self.config_dir,
            self.reload,
            on_change,
            stop_event,
            debounce_ms=debounce_ms,
            force_polling=force_polling,
            ready=ready,
        )


class DurableDocumentStore(DurableConfigStore, Generic[State]):
    """A store kept in one document.  A subclass says what the document holds
    (``document``), how it is named in logs (``what``), and how its state is compared with
    and put in force (:meth:`in_force`, :meth:`put_in_force`, :meth:`described`)."""

    # How log lines name the store's file ("ACL", "credentials").
    what: ClassVar[str]

    def __init__(
        self, data_dir: str | Path, document: type[ConfigDocument[State]]
    ) -> None:
        super().__init__(data_dir)
        self._document = document(self.config_dir)

    @property
    def path(self) -> Path:
        return self._document.path

    def read_document(self) -> State:
        """The document's state; raises ConfigFileError (file, line, key) if invalid."""
        return self._document.load()

    def save_document(self, state: State) -> None:
        """Write ``state`` (atomically, durably); the caller then puts it in force."""
        self._document.save(state)

    @abc.abstractmethod
    def in_force(self, state: State) -> bool:
        """Whether ``state`` (as read) is what is in force already."""

    @abc.abstractmethod
    def put_in_force(self, state: State) -> None:
        """Make ``state`` what is in force (a new version)."""

    @abc.abstractmethod
    def described(self) -> str:
        """What is in force, for the log line of a reload ("3 ACLs (version 4)")."""

    def reload(self) -> bool:
        """Re-read the document; True if what is in force changed.  An invalid document
        is logged and ignored (the last good content stays in force, ``last_error`` says
        why)."""
        try:
            state = self.read_document()
        except ConfigFileError as exc:
            self.last_error = str(exc)
            log.error(
                "%s file not reloaded, its last good content stays in force: %s",
                self.what,
                exc,
            )
            return False
        self.last_error = None
        if self.in_force(state):
            return False
        self.put_in_force(state)
        log.info("%s file reloaded: %s", self.what, self.described())
        return True

    # A store of one document is watched as it is: ``store.watch(on_change, ...)``.
    watch = DurableConfigStore.watch_directory
