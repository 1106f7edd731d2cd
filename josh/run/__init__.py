"""What one run is made of and how a conversation steps: the run spec, its components, the step, the conversation."""
