import Testing

@testable import CurlewS3

@Suite struct UploadS3CredentialsTests {
    static let credentialsFile = """
        [default]
        aws_access_key_id = AKIDDEFAULT
        aws_secret_access_key = default-secret

        # a comment
        [work]
        aws_access_key_id=AKIDWORK
        aws_secret_access_key=work-secret
        aws_session_token = work-token
        """
    static let configFile = """
        [default]
        region = eu-west-1
        [profile work]
        region = ap-south-1
        [profile config-only]
        aws_access_key_id = AKIDCONFIG
        aws_secret_access_key = config-secret
        """

    func resolver(_ environment: [String: String]) -> AWSCredentialResolver {
        AWSCredentialResolver(environment: ["HOME": "/home/u"].merging(environment) { $1 }) { path in
            switch path {
            case "/home/u/.aws/credentials": Self.credentialsFile
            case "/home/u/.aws/config": Self.configFile
            default: nil
            }
        }
    }

    @Test func environmentVariablesComeFirst() throws {
        let resolved = try resolver([
            "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token",
            "AWS_PROFILE": "work",
        ]).resolve()
        #expect(
            resolved.credentials
                == AWSCredentials(accessKeyID: "AKIDENV", secretAccessKey: "env-secret", sessionToken: "env-token"))
        #expect(resolved.source == "environment")
        #expect(resolved.region == "ap-south-1")
    }

    @Test func defaultProfileFromTheCredentialsFileWithTheConfigRegion() throws {
        let resolved = try resolver([:]).resolve()
        #expect(
            resolved.credentials
                == AWSCredentials(accessKeyID: "AKIDDEFAULT", secretAccessKey: "default-secret", sessionToken: nil))
        #expect(resolved.region == "eu-west-1")
        #expect(resolved.source == "profile default")
    }

    @Test func awsProfilePicksANamedProfileAndItsSessionToken() throws {
        let resolved = try resolver(["AWS_PROFILE": "work", "AWS_REGION": "us-west-2"]).resolve()
        #expect(
            resolved.credentials
                == AWSCredentials(accessKeyID: "AKIDWORK", secretAccessKey: "work-secret", sessionToken: "work-token"))
        #expect(resolved.region == "us-west-2")
    }

    @Test func keysInTheConfigFileCountToo() throws {
        let resolved = try resolver(["AWS_PROFILE": "config-only"]).resolve()
        #expect(resolved.credentials.accessKeyID == "AKIDCONFIG")
        #expect(resolved.region == nil)
    }

    @Test func aMissingProfileIsNamedButNoSecretIsPrinted() {
        #expect {
            try resolver(["AWS_PROFILE": "nope"]).resolve()
        } throws: { error in
            let message = "\(error)"
            return message.contains("\"nope\"") && !message.contains("default-secret")
                && !message.contains("work-secret")
        }
    }

    @Test func halfAnEnvironmentPairIsAnError() {
        let bare = AWSCredentialResolver(environment: ["HOME": "/nowhere", "AWS_ACCESS_KEY_ID": "AKID"]) { _ in nil }
        #expect(throws: AWSCredentialsError.self) { try bare.resolve() }
    }
}
