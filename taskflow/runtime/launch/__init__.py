"""Where clusters come from: the embedded LocalCluster whose workers reuse freed memory (:mod:`.local`),
workers as batch jobs through dask-jobqueue (:mod:`.jobqueue`), and an existing cluster reached by
its address or scheduler file (:mod:`.existing`)."""
