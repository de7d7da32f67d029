"""Where traces come from and what is kept of them: storage (local or fsspec), discovery of runs,
the memory budget's arithmetic, the disk cache of models and summaries, and the per-file
summaries read from it."""
