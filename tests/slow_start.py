"""A worker start-up that takes 6 s (loaded through ``$DGRAD_WORKER_PRELOAD``)."""

import time

time.sleep(6)
