"""Does the load–association fixed point converge deep in overload (docs/model.md §7.1)?"""
