"""Training: the step, the loop, a run's life, its monitor and stopping rules, the entry points."""
