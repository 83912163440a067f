"""Experimental solver APIs; ``armillary.solvers.experimental.coupled`` is the coupling framework."""
