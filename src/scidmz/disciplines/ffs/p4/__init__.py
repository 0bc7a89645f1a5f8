"""FFS in P4 (v1model): ``ffs.p4``, its generated tables ``include/ffs_tables.p4`` and their generator."""
