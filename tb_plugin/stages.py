"""The stages of loading a trace, as the loader reports them and the 202 replies name them.

A module of its own so that the TensorBoard side (`loading`, `plugin`) can name them without
importing the model's libraries at TensorBoard's start-up."""

STAGE_QUEUED = "queued"  # waiting for the loader thread (other traces may load first)
STAGE_READING = "reading"  # reading (and inflating) the file, with the fraction of it read; or the disk cache
STAGE_PARSING = "parsing"  # reading events, with the fraction of the JSON done
STAGE_BUILDING = "building"  # making and linking the tables
STAGE_COMPUTING = "computing"  # loaded; the view waits for others being computed (ask again)
