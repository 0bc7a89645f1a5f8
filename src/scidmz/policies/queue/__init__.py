"""Queue policies: K queues (rate, ceil, buffer) and flow -> queue rules every epoch (``kind = "queue"``).

- ``jenks``: RTT-based queue separation with Fisher-Jenks natural breaks
  (Gomez et al., ``jenks.py``).

The plant's per-flow table (``plant.flows()``) goes in, one ``QueueConfig`` per
instance comes out, applied with ``plant.apply_queues`` (``QueuePlant``).
"""
