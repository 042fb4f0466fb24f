"""Running a plan: the exact partial/merge algebra, the local strategy and the Ray strategy."""
