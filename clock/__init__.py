"""The one clock: what every part of the project reads time from and schedules on.

Kafka's ``Time`` in one interface (:class:`Clock`): monotonic milliseconds for rates,
windows and deadlines (``now_ms``), monotonic seconds for elapsed-time budgets
(``monotonic``), wall-clock nanoseconds for timestamps that leave the process
(``time_ns``), and waiting: a timer on the event loop (``call_later``), a coroutine
(``sleep``), a worker thread's interruptible wait (``wait``).

:class:`SystemClock` is the real one (compiled: the push path reads it on every request);
``clock.testing.FakeClock`` only moves when a test says so, as trio's ``MockClock`` does,
so no test sleeps to let a window, a throttle or a backoff pass.

The quota engine and the ClientMetricsManager stay sans-IO (``now_ms`` is a parameter of
every call); their owners hold the clock.  Imports nothing of the project.
"""

from clock.system import SYSTEM_CLOCK, Clock, SystemClock, Timer

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "Timer"]
