"""From task pairs to model inputs: the joint-sequence encoding, the seeded training stream and cached eval sets."""
