"""The memory plan, rank 2 of the pipeline (above the measures, below execute): what a run holds and what fits.

* ``plan.py``        ``MemoryPlan = plan_memory(ctx, shape=, memory_bytes=)``: the run's peak from every measure's
                     ``planned_state`` (and its early pass), the weights, one forward pass and publish; what is
                     dropped when it does not fit;
* ``terms.py``       the terms it adds up: runtime, plan, weights, forward pass, publish bytes; a device's free memory;
* ``per_device.py``  the plan per device of a model over several devices (``normvar plan --devices 8x80``; a mapped
                     compute's drops).
"""
