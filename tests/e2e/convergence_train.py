#!/usr/bin/python3
"""Trains a small CNN for the end-to-end convergence test (tests/e2e/convergence_test.sh).

  convergence_train.py torch ROOT OUT [SEED] fed by torch's DataLoader(shuffle=True,
                                             num_workers=2), its generator seeded
                                             with SEED (0); unchanged under `goldminer
                                             run --offload native` too
  convergence_train.py goldminer ROOT OUT    fed by goldminer.Loader (under `goldminer run`)

Both feeds apply the same augmentation (a random resized crop to 32x32, a random
horizontal flip, normalisation to mean 0.5 / std 0.25). The model starts from the same
seeded weights (three conv + batch norm blocks) and trains STEPS steps of batch 64 with SGD (lr 0.05, momentum 0.9).
Then the mean cross-entropy over every image of ROOT (resized to 32x32, no
augmentation) is measured. OUT gets {"train_losses": [...], "eval_loss": x}.
"""
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision import transforms  # noqa: E402

STEPS, BATCH = 30, 64
NORMALIZE = transforms.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])


def model(classes):
    torch.manual_seed(0)
    def block(cin, cout):
        return [torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                torch.nn.ReLU()]
    return torch.nn.Sequential(
        *block(3, 32), torch.nn.MaxPool2d(2), *block(32, 64), torch.nn.MaxPool2d(2),
        *block(64, 64), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, classes))


def torch_batches(root, seed):
    t = transforms.Compose([transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(),
                            transforms.ToTensor(), NORMALIZE])
    data = torchvision.datasets.ImageFolder(root, t)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(seed))
    while True:
        for x, y in loader:
            yield x, y


def goldminer_batches():
    import goldminer
    for batch in goldminer.Loader(epochs=100):
        yield torch.from_numpy(batch["image"].copy()), torch.from_numpy(batch["label"].copy())


def evaluate(net, root):
    net.eval()  # batch norm with the statistics training gathered
    t = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor(), NORMALIZE])
    data = torchvision.datasets.ImageFolder(root, t)
    total, n = 0.0, 0
    with torch.no_grad():
        for x, y in torch.utils.data.DataLoader(data, batch_size=256):
            total += torch.nn.functional.cross_entropy(net(x), y, reduction="sum").item()
            n += len(y)
    return total / n


def main():
    feed, root, out = sys.argv[1:4]
    torch.set_num_threads(1)
    classes = len([d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))])
    net = model(classes)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    batches = torch_batches(root, seed) if feed == "torch" else goldminer_batches()
    losses = []
    for _, (x, y) in zip(range(STEPS), batches):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(out, "w") as f:
        json.dump({"train_losses": losses, "eval_loss": evaluate(net, root)}, f)
    # Stop reading: goldminer's Loader would wait for the rest of its epochs, and
    # the DataLoader's iterator would end its workers one by one.
    os._exit(0)


if __name__ == "__main__":
    main()
