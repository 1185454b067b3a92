"""How long a message about another cluster's instance stays hidden once given back."""

from __future__ import annotations

from kubespot.controllers.interruption.queue_handler import foreign_pause


def test_visible_at_once_after_the_first_receive_then_backing_off_to_the_visibility_timeout() -> None:
    assert [foreign_pause(n, 30) for n in range(1, 9)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert foreign_pause(0, 30) == 0.0
