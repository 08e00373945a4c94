//! How old a boot image is, from the build date RHCOS writes into every release string
//! (`9.6.20250826-1`, `416.94.202405291527-0`) and so into the image names made from it
//! (`rhcos-9-6-20250826-1-gcp-x86-64`, an Azure marketplace version `9.6.20250826`, the
//! names the vSphere, OpenStack and Nutanix importers give, `<infra-id>-rhcos-<release>...`).
//! Pure.

use k8s_openapi::jiff::civil::Date;

/// The build date in a release string or an image name: the first token of 8 or 12 digits
/// (`YYYYMMDD`, `YYYYMMDDhhmm`) that is a real date of this century. `None` for names that
/// carry none (an AWS AMI id).
pub fn build_date(image: &str) -> Option<Date> {
    image
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| (t.len() == 8 || t.len() == 12) && t.bytes().all(|b| b.is_ascii_digit()))
        .find_map(|t| {
            let year: i16 = t[0..4].parse().ok()?;
            let month: i8 = t[4..6].parse().ok()?;
            let day: i8 = t[6..8].parse().ok()?;
            if !(2000..2100).contains(&year) {
                return None;
            }
            Date::new(year, month, day).ok()
        })
}

/// Whole days from `image`'s build date to `today` (0 for a date in the future).
pub fn age_days(image: &str, today: Date) -> Option<i64> {
    let built = build_date(image)?;
    let days = (today - built).get_days();
    Some(i64::from(days.max(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_release_strings_and_image_names() {
        let d = |y, m, day| Some(Date::new(y, m, day).unwrap());
        for (image, want) in [
            ("rhcos-9-6-20250826-1-gcp-x86-64", d(2025, 8, 26)),
            (
                "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64",
                d(2024, 5, 29),
            ),
            ("9.6.20250826-1", d(2025, 8, 26)),
            ("418.94.202410090804-0", d(2024, 10, 9)),
            ("azureopenshift:aro4:aro_419:9.6.20250523", d(2025, 5, 23)),
            ("ami-06f85a7940faa3217", None),
            ("projects/my-project/global/images/custom", None),
            ("rhcos-9-6-20251399-1", None),
            ("", None),
        ] {
            assert_eq!(build_date(image), want, "{image}");
        }
        let today = Date::new(2026, 12, 3).unwrap();
        assert_eq!(age_days("rhcos-9-8-20261203-0-gcp-x86-64", today), Some(0));
        assert_eq!(age_days("rhcos-9-8-20261202-0-gcp-x86-64", today), Some(1));
        assert_eq!(
            age_days("rhcos-9-6-20250826-1-gcp-x86-64", today),
            Some(464)
        );
        assert_eq!(age_days("rhcos-9-9-20270101-0-gcp-x86-64", today), Some(0));
    }
}
