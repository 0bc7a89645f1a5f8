"""ABC in P4 (v1model): ``abc.p4``, its generated tables ``include/abc_tables.p4`` and their generator."""
