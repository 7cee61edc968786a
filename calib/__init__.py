"""calib: calibrate the gradient probe's predicted gains against matched-compute ground truth (issue 4)."""
