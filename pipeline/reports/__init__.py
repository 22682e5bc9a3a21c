"""Reports written from finished runs: Table 2 (parameters), Table 3 (accuracies beside the paper's), curves."""
