"""vulture allow-list: names that look unused but are called by a framework (one reason per entry)."""

epoch  # Keras Callback.on_epoch_end(epoch, logs): the signature is Keras's (models/inverse.py)
indices  # PyGAD fitness_func(ga, solutions, indices): the signature is PyGAD's (tuning/ga.py)
