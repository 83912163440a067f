"""Hook implementations of armillary-coupling (entry point ``coupling`` in group ``armillary``).

This distribution will register `SolverCoupled`, `SolverCoupledProxy`, `SolverCoupledADMM` through the
``armillary_register_solvers`` hook (issue #10). Until
then it registers nothing, so that no placeholder can be mistaken for a
working implementation: ``armillary plugins`` lists it as providing
nothing yet, and asking for one of its names raises ``ImportError``
saying this version does not provide it.
"""
