"""Initialize Warp before any test captures stdout (its banner would pollute printed outputs)."""

import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.init()
