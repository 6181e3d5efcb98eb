"""Cluster launchers: the embedded LocalCluster whose workers reuse freed memory (:mod:`.local`) and
workers as batch jobs through dask-jobqueue (:mod:`.jobqueue`)."""
