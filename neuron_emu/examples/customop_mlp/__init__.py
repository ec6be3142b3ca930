"""ReLU as Neuron custom C++ ops, training an MLP on scikit-learn's digits and serving the traced model."""
