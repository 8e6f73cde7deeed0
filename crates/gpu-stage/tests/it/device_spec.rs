//! `--device` strings parse to the device they name, and everything else is refused.

use gpu_stage::{DeviceSpec, Error};

#[test]
fn cuda_with_ordinal_parses_to_that_ordinal() {
    assert_eq!("cuda:0".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
    assert_eq!("cuda:7".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(7));
    assert_eq!(
        "cuda:2147483647".parse::<DeviceSpec>().unwrap(),
        DeviceSpec::Cuda(2147483647)
    );
}

#[test]
fn bare_cuda_means_device_zero_and_cpu_means_no_gpu() {
    assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
    assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
    assert_eq!(DeviceSpec::default(), DeviceSpec::Cpu);
    assert_eq!(DeviceSpec::Cpu.cuda_ordinal(), None);
    assert_eq!(DeviceSpec::Cuda(3).cuda_ordinal(), Some(3));
}

#[test]
fn display_round_trips() {
    for spec in [DeviceSpec::Cpu, DeviceSpec::Cuda(0), DeviceSpec::Cuda(12)] {
        assert_eq!(spec.to_string().parse::<DeviceSpec>().unwrap(), spec);
    }
    assert_eq!(DeviceSpec::Cuda(1).to_string(), "cuda:1");
}

#[test]
fn malformed_specs_are_typed_errors_naming_the_input() {
    let cases = [
        ("", "empty"),
        ("gpu:0", "unknown device kind"),
        ("CUDA:0", "unknown device kind"),
        ("cuda:", "the ordinal must be a decimal number"),
        ("cuda:+1", "the ordinal must be a decimal number"),
        ("cuda:-1", "the ordinal must be a decimal number"),
        ("cuda: 1", "the ordinal must be a decimal number"),
        ("cuda:1 ", "the ordinal must be a decimal number"),
        ("cuda:0x1", "the ordinal must be a decimal number"),
        ("cuda:2147483648", "the ordinal is too large"),
        ("cuda:99999999999999999999999", "the ordinal is too large"),
    ];
    for (text, expected) in cases {
        match text.parse::<DeviceSpec>() {
            Err(Error::InvalidDeviceSpec { spec, reason }) => {
                assert_eq!(spec, text);
                assert_eq!(reason, expected, "for {text:?}");
            }
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }
    let message = "gpu".parse::<DeviceSpec>().unwrap_err().to_string();
    assert!(
        message.contains("\"gpu\"") && message.contains("cuda:N"),
        "{message}"
    );
}
