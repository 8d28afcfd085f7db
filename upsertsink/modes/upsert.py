"""``merge_engine="upsert"`` (the default): the newest row of a key by ``sequence_by`` wins, deletes are
remembered (tombstones), and ``scd_type=2`` keeps history. Its MERGE is ``protocol._attempt`` (and
``protocol._attempt_history``), today's path: this class only names the mode and refuses the other modes'
options."""

from __future__ import annotations

from upsertsink.modes.base import MergeMode


class Upsert(MergeMode):
    name = "upsert"
    narrow_batches = False
