"""Hook implementations of armillary-solver-xpbd (entry point ``solver_xpbd`` in group ``armillary``).

This distribution will register `SolverXPBD` through the
``armillary_register_solvers`` hook (issue #8). Until
then it registers nothing, so that no placeholder can be mistaken for a
working implementation: ``armillary plugins`` lists it as providing
nothing yet, and asking for one of its names raises ``ImportError``
saying this version does not provide it.
"""
