"""torchvision's ResNet as the reference for train's float32 gradients, on train's own decisions.

A ResNet's gradient is piecewise: every ReLU decides whether its input is positive, every max-pool window
which input wins. Where such a decision sits within float32's rounding of a tie (a ReLU input of 1e-6 of its
layer's size), any float32 implementation may decide it the other way than float64 does, and one flipped
ReLU moves a whole gradient path: 1e-2 of a batch-norm gradient is typical. PyTorch's own float32 does it in
about half of the small random batches tried (tests/model/train_step_sweep.py), train's float32 in about a
third, at other elements: whose rounding lands on which side is chance. So the reference for a float32
gradient is float64 on float32's decisions, and the check has two parts:

- every decision train took differently from float64 is one float32 cannot tell: its float64 margin (|x| for
  a ReLU; best minus the chosen input for a max-pool window) is within AMBIGUITY RMS float32 errors of that
  activation (PyTorch's own float32 error on the same batch, measured here);
- on train's decisions, float64's gradient equals train's to float32's rounding: per tensor, a relative error
  of at most max(1e-4, 5 x PyTorch float32's own error on the same decisions).

Train's decisions come from tests/model/model_check (the model's training pass on a batch: each ReLU's output
and each max-pool window's winner, "decision.relu.K" and "decision.pool.K").
"""
import copy

import numpy as np
import torch
import torch.nn.functional as F

# A decision taken the other way than float64 is float32 rounding when float64's margin is below this many
# RMS float32 errors of its activation; beyond it, it is a wrong activation.
AMBIGUITY = 8.0


def relative(ours, reference):
    ours = np.asarray(ours, dtype=np.float64).reshape(-1)
    reference = np.asarray(reference, dtype=np.float64).reshape(-1)
    scale = np.linalg.norm(reference)
    return float(np.linalg.norm(ours - reference) / (scale if scale > 0 else 1.0))


def decisions_of(outputs):
    """train's decisions from model_check's output: ([ReLU masks], [max-pool winners]) in forward order, NCHW."""
    relus, pools = [], []
    while f"decision.relu.{len(relus)}" in outputs:
        relus.append(torch.from_numpy(np.ascontiguousarray(outputs[f"decision.relu.{len(relus)}"].transpose(0, 3, 1, 2)))
                     > 0.5)
    while f"decision.pool.{len(pools)}" in outputs:
        pools.append(torch.from_numpy(np.ascontiguousarray(
            outputs[f"decision.pool.{len(pools)}"].transpose(0, 3, 1, 2))).to(torch.int64))
    return relus, pools


def initial_model(depth, classes, seed, batches_tracked=None):
    """torchvision's ResNet with its default initialisation and batch-norm parameters and buffers away from
    their defaults (so that a swapped weight and bias, or mean and variance, shows); num_batches_tracked set to
    BATCHES_TRACKED where given."""
    import torchvision
    torch.manual_seed(seed)
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=classes)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                if batches_tracked is not None:
                    module.num_batches_tracked.fill_(batches_tracked)
    return model


class _Pass:
    """One forward pass: what each ReLU and max pool saw, and the decisions to take (None: its own)."""

    def __init__(self, decisions):
        self.relus, self.pools = decisions if decisions is not None else (None, None)
        self.relu_inputs, self.relu_names, self.pool_inputs = [], [], []
        self.calls_of = {}


class _ReLU(torch.nn.Module):
    def __init__(self, name, current):
        super().__init__()
        self.name, self.current = name, current

    def forward(self, x):
        run = self.current()
        call = len(run.relu_inputs)
        run.relu_inputs.append(x.detach())
        # torchvision's blocks call one ReLU module more than once: after bn1 (bn2), and after the add.
        nth = run.calls_of.get(self.name, 0)
        run.calls_of[self.name] = nth + 1
        run.relu_names.append(f"{self.name} (call {nth + 1})")
        mask = (x > 0) if run.relus is None else run.relus[call]
        if mask.shape != x.shape:
            raise ValueError(f"train's ReLU {call} decided {tuple(mask.shape)} values, torchvision's has {tuple(x.shape)}")
        return x * mask.to(x.dtype)


class _MaxPool(torch.nn.Module):
    def __init__(self, pool, current):
        super().__init__()
        self.pool, self.current = pool, current

    def forward(self, x):
        run = self.current()
        call = len(run.pool_inputs)
        run.pool_inputs.append((x.detach(), (self.pool.kernel_size, self.pool.stride, self.pool.padding)))
        y, index = F.max_pool2d(x, self.pool.kernel_size, self.pool.stride, self.pool.padding, return_indices=True)
        if run.pools is not None:
            index = run.pools[call]
            if index.shape != y.shape:
                raise ValueError(f"train's max pool {call} has {tuple(index.shape)} windows, torchvision's {tuple(y.shape)}")
        return x.flatten(2).gather(2, index.flatten(2)).view_as(y)


class ReferenceResNet:
    """A torchvision ResNet whose ReLUs and max pools record their inputs and may take given decisions."""

    def __init__(self, model):
        self.model = copy.deepcopy(model)
        self.run = _Pass(None)
        self._patch(self.model, "")

    def _patch(self, module, prefix):
        for name, child in module.named_children():
            if isinstance(child, torch.nn.ReLU):
                setattr(module, name, _ReLU(prefix + name, lambda: self.run))
            elif isinstance(child, torch.nn.MaxPool2d):
                setattr(module, name, _MaxPool(child, lambda: self.run))
            else:
                self._patch(child, prefix + name + ".")

    def step(self, images, labels, dtype, decisions=None, scale=1.0, smoothing=0.0):
        """One train-mode forward and backward of a copy of the model in `dtype` (taking `decisions` where
        given): ({parameter: gradient x scale}, {buffer: running statistic after it}, the pass)."""
        replica = copy.deepcopy(self.model).to(dtype).train()
        self.run = _Pass(decisions)
        loss = F.cross_entropy(replica(torch.as_tensor(images, dtype=dtype)), torch.as_tensor(labels),
                               label_smoothing=smoothing)
        loss.backward()
        gradients = {n: p.grad.detach().double().numpy() * scale for n, p in replica.named_parameters()}
        running = {n: b.detach().double().numpy().copy() for n, b in replica.named_buffers() if "running" in n}
        return gradients, running, self.run


def _noise(x, x32):
    return float((x32.double() - x).pow(2).mean().sqrt())


def other_decisions(exact, single, decisions):
    """Every decision of `decisions` that float64 (`exact`, a pass with its own decisions) took the other way:
    (float64 margin in RMS float32 errors of that activation, description), largest margin first. `single`:
    the float32 pass of the same batch (its activations against float64's are the float32 error)."""
    relus, pools = decisions
    found = []
    for call, (x, x32, ours) in enumerate(zip(exact.relu_inputs, single.relu_inputs, relus)):
        differs = ours != (x > 0)
        if differs.any():
            noise = _noise(x, x32)
            for element in torch.nonzero(differs.flatten()).flatten().tolist():
                margin = abs(float(x.flatten()[element])) / noise if noise > 0 else float("inf")
                found.append((margin, f"ReLU {exact.relu_names[call]} element {element} "
                                      f"({'passed' if ours.flatten()[element] else 'blocked'} by train)"))
    for call, ((x, geometry), (x32, _), ours) in enumerate(zip(exact.pool_inputs, single.pool_inputs, pools)):
        plane = x.flatten(2)
        chosen = plane.gather(2, ours.flatten(2))
        _, own = F.max_pool2d(x, *geometry, return_indices=True)
        differs = own.flatten(2) != ours.flatten(2)
        if differs.any():
            noise = _noise(x, x32)
            best_values = plane.gather(2, own.flatten(2))
            for n, c, o in torch.nonzero(differs).tolist():
                margin = float(best_values[n, c, o] - chosen[n, c, o]) / noise if noise > 0 else float("inf")
                found.append((margin, f"max pool {call} window {o} of image {n} channel {c} (train took input "
                                      f"{int(ours.flatten(2)[n, c, o])}, float64 {int(own.flatten(2)[n, c, o])})"))
    found.sort(key=lambda entry: -entry[0])
    return found


class StepReference:
    """One step over several ranks' shards (each rank's mean loss; gradients averaged over ranks) in float64:
    on float64's own decisions (`plain`), in float32 (`single`, PyTorch's own float32 noise), and on given
    decisions per rank (`on_decisions`)."""

    def __init__(self, model, shard_images, shard_labels, smoothing=0.0):
        self.reference = ReferenceResNet(model)
        self.shards = list(zip(shard_images, shard_labels))
        self.smoothing = smoothing
        self.ranks = len(self.shards)
        self.exact, self.single_passes = [], []
        self.plain = self.single = self.running = self.single_running = None
        for rank in range(self.ranks):
            g64, r64, exact = self._step(rank, torch.float64)
            g32, r32, single = self._step(rank, torch.float32)
            self.plain, self.single = _add(self.plain, g64), _add(self.single, g32)
            self.exact.append(exact)
            self.single_passes.append(single)
            if rank == 0:
                self.running, self.single_running = r64, r32

    def _step(self, rank, dtype, decisions=None):
        images, labels = self.shards[rank]
        return self.reference.step(images, labels, dtype, decisions, 1.0 / self.ranks, self.smoothing)

    def on_decisions(self, decisions_per_rank):
        """On train's decisions: float64's gradient, PyTorch's float32 gradient (its own rounding on the same
        path: the noise a float32 implementation has), and every decision train took differently from float64
        ((rank, margin, what), largest margin first)."""
        exact, single, differences = None, None, []
        for rank, decisions in enumerate(decisions_per_rank):
            exact = _add(exact, self._step(rank, torch.float64, decisions)[0])
            single = _add(single, self._step(rank, torch.float32, decisions)[0])
            differences += [(rank, margin, what) for margin, what in
                            other_decisions(self.exact[rank], self.single_passes[rank], decisions)]
        differences.sort(key=lambda entry: -entry[1])
        return exact, single, differences


def tolerance(exact, single, floor=1e-4, factor=5.0):
    """Per tensor: max(floor, factor x PyTorch float32's own error), both on the same decisions."""
    return {n: max(floor, factor * relative(single[n], exact[n])) for n in exact}


def _add(total, gradients):
    return dict(gradients) if total is None else {n: total[n] + gradients[n] for n in total}
