"""New capacity for a pod group: the NodePools in weight order, each pool's candidates, the
packing, and the reasons per pool when none takes the group.
"""

from __future__ import annotations

from .claim import Opening
from .explain import GroupStory
from .fit import pod_needs
from .greedy import Greedy
from .groups import Group
from .labels import WELL_KNOWN
from .taints import untolerated


class NewClaims(Greedy):
    """New NodeClaims for a group."""

    def _new_claims(self, group: Group) -> list[str]:
        """Open new NodeClaims for ``group`` (and what may share them); why not, when none fits."""
        pod = group.exemplar
        need = pod_needs(pod.requests)
        reasons: list[str] = []
        for pc in self.pools:
            pool = pc.pool
            bad = untolerated(pool.taints, pod.tolerations)
            if bad:
                reasons.append(f'nodepool "{pool.name}": did not tolerate taint {bad[0]}')
                continue
            conflict = pool.requirements.compatibility(pod.requirements, WELL_KNOWN)
            if conflict:
                reasons.append(f'nodepool "{pool.name}": incompatible requirements, {conflict[0]}')
                continue
            reqs = self._merge(pool.requirements, pod)
            assert reqs is not None
            # Without limits the candidates depend on the requirements and the pod alone, and
            # pods with topology rules open many NodeClaims of the same few shapes.
            memo_key = (pool.name, id(reqs), tuple(sorted(need.items())))
            memo = None if pool.limits else self._candidate_memo.get(memo_key)
            if memo is None:
                types, dropped, problem = self._candidates(pc, reqs, need)
                books = self._price_books(types, reqs) if types else {}
                memo = (reqs, types, dropped, problem, books)
                if not pool.limits:
                    self._candidate_memo[memo_key] = memo
            _, types, dropped, problem, books = memo
            if not books:
                detail = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()))
                if problem:
                    reasons.append(f'nodepool "{pool.name}": {problem}' + (f" ({detail})" if detail else ""))
                else:
                    reasons.append(
                        f'nodepool "{pool.name}": no instance type fits ({detail or "none offered"})'
                    )
                continue
            self._opening = Opening(types, dropped)
            opened = len(self.claims)
            if self._pack(group, pc, reqs, types, books):
                for r in reasons:
                    group.story.pool(*split_reason(r))
                # Each group packed here (the opening one and those that shared its NodeClaims)
                # tells of the NodeClaims holding its own pods (decision 4).
                held: dict[int, tuple[GroupStory, int]] = {}
                for claim in self.claims[opened:]:
                    for key, story in claim.stories.items():
                        held[key] = (story, held.get(key, (story, 0))[1] + 1)
                for story, n in held.values():
                    story.opened_claims(pool.name, n)
                return []
            reasons.append(f'nodepool "{pool.name}": no instance type holds the pod with a price')
        for r in reasons:
            group.story.pool(*split_reason(r))
        return reasons or ["no NodePool"]


def split_reason(reason: str) -> tuple[str, str]:
    """'nodepool "a": why' as ("a", "why")."""
    head, _, why = reason.partition(": ")
    return head.removeprefix("nodepool ").strip('"'), why
