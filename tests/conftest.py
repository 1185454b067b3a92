pytest_plugins = ["kubespot.sim.awssim.pytest_plugin"]
