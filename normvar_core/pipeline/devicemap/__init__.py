"""One model over several devices (``--device-map``, accelerate's big-model path), from loading to the plan.

* ``model_map.py``    the model loaded over the devices (``from_pretrained``'s device_map / max_memory /
                      offload_folder), where each module sits, where the token ids go and where each hidden
                      state's statistics live (``state_places``);
* ``layer_groups.py`` state beside its layer: every measure held as one per device-map entry, on its device
                      (``LayerSplit``), gathered on the host for a checkpoint, a merge and publishing;
* ``per_device.py``   the memory plan per device (``normvar plan --devices 8x80``; a mapped compute's drops).

The options as typed (``--device-map``, ``--max-memory``, ``--offload-folder``, ``plan --devices``) are parsed
and checked in the base layer, ``normvar_core/device_options.py``, where ``RunConfig.validate`` reads them.
"""
