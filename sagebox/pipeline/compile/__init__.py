"""Stage 6, compile. In: a Hugging Face model folder (any encoder task). Out: a NeuronCore (Inferentia2/Trainium)
model directory, compiled per bucket by Sagebox's emulator (`neuron_emu`, anywhere) or by torch-neuronx where the
Neuron SDK is installed (`neuron`)."""
