"""Pure data types shared by every part of kubespot: no I/O, and no imports of other kubespot code.

Sources produce ``InterruptionEvent``s; handling and actions consume them.
"""

from .clock import Clock, SystemClock
from .events import InterruptionEvent, Kind, Source, event_id

__all__ = ["Clock", "InterruptionEvent", "Kind", "Source", "SystemClock", "event_id"]
