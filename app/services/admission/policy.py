"""The admission policy a round runs: the operator's choice stored by ``PUT /admission`` (read
by every round, so every replica follows it and a restart keeps it), else the settings'."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.db import jobs_repo, repo
from app.db.models import Decision
from app.db.session import transaction
from app.jobs.rounds import AdmissionConfig, policy_of, policy_values, with_policy
from app.policies import registry
from app.policies.base import PolicyError
from app.services.admission.common import ServiceState


class PolicyChoice(ServiceState):
    """Reading and changing the admission policy."""

    def current_cfg(self, session: Session) -> AdmissionConfig:
        """The configuration this round runs: the stored ``PUT /admission`` choice, else the
        settings'. A stored choice that no longer validates (a parameter renamed by an upgrade)
        is logged and the settings' policy runs. Remembered for the next call (callers that
        hold the admission lock; others use ``peek_cfg``)."""
        cfg, key = self._configured(session)
        # One reference, so a reader outside the lock sees a key with its own configuration.
        self._cfg_known = None if key is None else (key, cfg)
        self.cfg = cfg
        return cfg

    def peek_cfg(self, session: Session) -> AdmissionConfig:
        """``current_cfg`` without remembering it: for a reader outside the admission lock,
        which must not interleave its two assignments with a lock holder's."""
        return self._configured(session)[0]

    def _configured(self, session: Session) -> tuple[AdmissionConfig, tuple[str, str, int] | None]:
        row = jobs_repo.admission_setting(session, self.default_cfg.cluster_name)
        if row is None:
            return self.default_cfg, None
        key = (row.policy, json.dumps(row.params, sort_keys=True), row.updated_ms)
        known = self._cfg_known
        if known is not None and known[0] == key:
            return known[1], key
        try:
            # a parameter added by an upgrade after the choice was stored: the settings' value
            values = policy_values(self.default_cfg, row.policy, row.params)
            policy = registry.admission_policy(row.policy, values)
        except PolicyError as exc:
            self.log.error("stored admission policy %r is invalid (%s)", row.policy, exc)
            return self.default_cfg, None
        return with_policy(self.default_cfg, policy), key

    def policy_source(self, session: Session) -> str:
        """``operator`` when ``PUT /admission`` chose the policy, else ``settings``."""
        row = jobs_repo.admission_setting(session, self.default_cfg.cluster_name)
        return "settings" if row is None else "operator"

    def set_policy(self, name: str, params: Mapping[str, Any], now_ms: int) -> AdmissionConfig:
        """``PUT /admission``: validate through the registry (``PolicyError`` naming ``policy``
        or ``params.<name>``), store it and record the change in the audit trail."""
        policy = registry.admission_policy(name, policy_values(self.default_cfg, name, params))
        with self._db_lock, transaction(self.sessions) as session:
            previous = self.current_cfg(session)
            old = policy_of(previous)
            jobs_repo.save_admission_setting(
                session, self.default_cfg.cluster_name, policy.name, dict(policy.params), now_ms
            )
            cluster = repo.ensure_cluster(
                session, self.default_cfg.cluster_name, self.options.rm_urls, now_ms
            )
            repo.add_decision(
                session,
                Decision(
                    cluster_id=cluster.id,
                    created_ms=now_ms,
                    kind="policy",
                    policy=policy.name,
                    mode=previous.mode,
                    params=dict(policy.params),
                    inputs={
                        "scope": "admission",
                        "previous": {"policy": old.name, "params": dict(old.params)},
                        "changes": {"policy": name, "params": dict(params)},
                    },
                    outputs={"admission": {"policy": policy.name, "params": dict(policy.params)}},
                    status="applied",
                    reason=f"operator set the admission policy to {policy.name}",
                ),
            )
            self._cfg_known = None
            return self.current_cfg(session)
