import pytest

from framework.registry import Registry


def test_register_get_build_and_errors():
    reg = Registry("widget")

    @reg.register()
    class Knob:
        def __init__(self, size=1):
            self.size = size

    reg.register("Dial", obj=dict)
    assert reg.get("Knob") is Knob and "Dial" in reg and reg.names() == ["Dial", "Knob"]
    assert reg.build({"type": "Knob", "size": 3}).size == 3
    with pytest.raises(KeyError, match=r"unknown widget 'Knb'; did you mean 'Knob'\? Known: Dial, Knob"):
        reg.get("Knb")
    with pytest.raises(KeyError, match="'Knob' is already registered"):
        reg.register("Knob", obj=object)
    with pytest.raises(ValueError, match="'type' key"):
        reg.build({"size": 3})
