"""The simulated GPU cluster: catalog, cluster state, placement, the SimPy simulator and its Gymnasium facade."""
