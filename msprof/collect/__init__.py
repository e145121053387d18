"""msprof collect: push the app to the board over SSH, run it with profiling on, pull JOB dirs back."""
