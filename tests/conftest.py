import torch

# One torch thread per process: two threads in one process are unstable on the 2-core machines this runs on.
torch.set_num_threads(1)
