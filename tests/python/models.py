"""Models for the Python tests: torchvision's as they are, and small versions of their
families (the same module types: BatchNorm, residual blocks, Dropout, Linear heads) that
keep a CI run short.

The small ones pool without max: after a ReLU, max-pooling windows are often all exact
zeros, a tie that the last bit of an input decides, and the whole upstream gradient moves
with it. Any change of rounding (another summation order) can flip such a tie, and the
runs then end ~1e-4 apart for a reason that has nothing to do with synchronisation.
(The CIFAR ResNets drop the stem's max-pool for small images too.)"""
import torch
import torchvision


def _first_conv_channels(model, channels):
    """torchvision's ResNets take 3 channels; Fashion-MNIST has 1."""
    if channels != 3:
        old = model.conv1
        model.conv1 = torch.nn.Conv2d(channels, old.out_channels, old.kernel_size, old.stride, old.padding,
                                      bias=False)
    return model


def build_model(name, classes, channels=3):
    tv = torchvision.models
    if name in ("resnet18", "resnet50"):
        return _first_conv_channels(getattr(tv, name)(num_classes=classes), channels)
    if name == "small_resnet":  # ResNet with one BasicBlock per stage
        model = tv.resnet.ResNet(tv.resnet.BasicBlock, [1, 1, 1, 1], num_classes=classes)
        model.maxpool = torch.nn.Identity()
        return _first_conv_channels(model, channels)
    if name in ("vgg11", "vgg11_bn"):
        model = getattr(tv, name)(num_classes=classes)
        if channels != 3:
            model.features[0] = torch.nn.Conv2d(channels, 64, 3, padding=1)
        return model
    if name == "small_vgg":  # VGG-11's features, a two-layer classifier with Dropout
        model = tv.vgg11(num_classes=classes)
        model.features[0] = torch.nn.Conv2d(channels, 64, 3, padding=1)
        for i, m in enumerate(model.features):
            if isinstance(m, torch.nn.MaxPool2d):
                model.features[i] = torch.nn.AvgPool2d(2)
        model.avgpool = torch.nn.AdaptiveAvgPool2d(1)
        model.classifier = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(True), torch.nn.Dropout(),
                                               torch.nn.Linear(256, classes))
        return model
    if name == "mlp":  # the first Linear's input needs no gradient; ReLU works in place after it
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(channels * 32 * 32, 64),
                                   torch.nn.ReLU(inplace=True), torch.nn.Linear(64, classes))
    raise ValueError(f"unknown model {name}")
